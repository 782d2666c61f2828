package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// funcCollector exports at scrape time what collect computes, as series
// of descs: the one shape of every series read from a hook (the sinks,
// the sources, the panic).
type funcCollector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

// Describe implements prometheus.Collector.
func (c funcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// gauge is the value of a 0/1 gauge.
func gauge(b bool) float64 { return float64(b2i(b)) }

// unixSeconds is t as a timestamp gauge's value: 0 for the zero time
// (never).
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
