package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/observe"
)

// buildObservations creates the series of the calls' outcomes.
func (m *Metrics) buildObservations() []prometheus.Collector {
	taken := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_observations_total",
		Help: "Calls' outcomes applied to at least one contact, by source (api, ami, kamailio) and outcome (answered, failed, timeout, transport).",
	}, []string{"source", "outcome"})
	for s := range observe.NumSources {
		for o := 1; o < observe.NumOutcomes; o++ {
			m.observations[s][o] = taken.WithLabelValues(observe.Source(s).String(), observe.Outcome(o).String())
		}
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_observations_dropped_total",
		Help: "Calls' outcomes dropped, by reason (malformed, oversized, unknown, stale, flood).",
	}, []string{"reason"})
	for d := range observe.NumDrops {
		m.obsDropped[d] = dropped.WithLabelValues(observe.Drop(d).String())
	}
	return []prometheus.Collector{taken, dropped}
}

// CountObservations counts what a batch of observations became.
func (m *Metrics) CountObservations(t observe.Tally) {
	for s := range t.BySource {
		for o := 1; o < observe.NumOutcomes; o++ {
			if n := t.BySource[s][o]; n > 0 {
				m.observations[s][o].Add(float64(n))
			}
		}
	}
	for d, n := range t.Dropped {
		if n > 0 {
			m.obsDropped[d].Add(float64(n))
		}
	}
}
