package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SourceStats are one source's state that the metrics export; the
// caller copies them from its sources.
type SourceStats struct {
	// Name is the source's section name: the source label.
	Name string
	// Up is whether the last read succeeded and its list was taken.
	Up bool
	// AoRs counts the AoRs of the list in use.
	AoRs int
	// LastSuccess is the last successful read; zero if none.
	LastSuccess time.Time
	// Errors counts reads that failed, returned garbage or were refused.
	Errors uint64
}

var (
	descSourceUp = prometheus.NewDesc("qualifyd_source_up",
		"1 when the source's last read succeeded and its list was taken.", []string{"source"}, nil)
	descSourceAoRs = prometheus.NewDesc("qualifyd_source_aors",
		"AoRs imported from the source (its last good list).", []string{"source"}, nil)
	descSourceLast = prometheus.NewDesc("qualifyd_source_last_success_timestamp_seconds",
		"Unix time of the source's last successful read; 0 if none.", []string{"source"}, nil)
	descSourceErrors = prometheus.NewDesc("qualifyd_source_errors_total",
		"Reads of the source that failed, returned garbage or were refused by the shrink guard.", []string{"source"}, nil)
)

// WatchSources registers with reg the source series, read from sources
// at scrape time.
func (m *Metrics) WatchSources(reg prometheus.Registerer, sources func() []SourceStats) error {
	if reg == nil || sources == nil {
		return errors.New("metrics: no registerer or no sources")
	}
	return reg.Register(funcCollector{
		descs: []*prometheus.Desc{descSourceUp, descSourceAoRs, descSourceLast, descSourceErrors},
		collect: func(ch chan<- prometheus.Metric) {
			for _, s := range sources() {
				collectSource(ch, s)
			}
		},
	})
}

// collectSource sends one source's series.
func collectSource(ch chan<- prometheus.Metric, s SourceStats) {
	ch <- prometheus.MustNewConstMetric(descSourceUp, prometheus.GaugeValue, gauge(s.Up), s.Name)
	ch <- prometheus.MustNewConstMetric(descSourceAoRs, prometheus.GaugeValue, float64(s.AoRs), s.Name)
	ch <- prometheus.MustNewConstMetric(descSourceLast, prometheus.GaugeValue, unixSeconds(s.LastSuccess), s.Name)
	ch <- prometheus.MustNewConstMetric(descSourceErrors, prometheus.CounterValue, float64(s.Errors), s.Name)
}
