package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SinkStats are one sink's counters that the metrics export; the caller
// copies them from its sinks.
type SinkStats struct {
	// Name is the sink's section name: the sink label.
	Name string
	// Up is connected: the router answered the last request.
	Up bool
	// Pending counts objects whose router state differs from qualifyd's.
	Pending int
	// LastSuccess is the last successful request; zero if none.
	LastSuccess time.Time
	// OK, Error and Dropped count pushes by result.
	OK, Error, Dropped uint64
}

var (
	descSinkUp = prometheus.NewDesc("qualifyd_sink_up",
		"1 when the sink is connected: the router answered its last request (a refusal included).", []string{"sink"}, nil)
	descSinkPushes = prometheus.NewDesc("qualifyd_sink_pushes_total",
		"Pushes to the sink by result (ok, error, dropped).", []string{"sink", "result"}, nil)
	descSinkPending = prometheus.NewDesc("qualifyd_sink_pending",
		"Objects whose state in the router differs from qualifyd's.", []string{"sink"}, nil)
	descSinkLast = prometheus.NewDesc("qualifyd_sink_last_success_timestamp_seconds",
		"Unix time of the sink's last successful request; 0 if none.", []string{"sink"}, nil)
)

// WatchSinks registers with reg the sink series, read from sinks at
// scrape time; the sinks may change between scrapes (a reload).
func (m *Metrics) WatchSinks(reg prometheus.Registerer, sinks func() []SinkStats) error {
	if reg == nil || sinks == nil {
		return errors.New("metrics: no registerer or no sinks")
	}
	return reg.Register(sinkCollector(sinks))
}

// sinkCollector computes the sink series at scrape time.
type sinkCollector func() []SinkStats

// Describe implements prometheus.Collector.
func (c sinkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSinkUp, descSinkPushes, descSinkPending, descSinkLast} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c sinkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c() {
		up, last := 0.0, 0.0
		if s.Up {
			up = 1
		}
		if !s.LastSuccess.IsZero() {
			last = float64(s.LastSuccess.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(descSinkUp, prometheus.GaugeValue, up, s.Name)
		ch <- prometheus.MustNewConstMetric(descSinkPending, prometheus.GaugeValue, float64(s.Pending), s.Name)
		ch <- prometheus.MustNewConstMetric(descSinkLast, prometheus.GaugeValue, last, s.Name)
		for _, r := range []struct {
			label string
			n     uint64
		}{{"ok", s.OK}, {"error", s.Error}, {"dropped", s.Dropped}} {
			ch <- prometheus.MustNewConstMetric(descSinkPushes, prometheus.CounterValue, float64(r.n), s.Name, r.label)
		}
	}
}
