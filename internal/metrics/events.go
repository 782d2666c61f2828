package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// buildEvents creates the series fed by engine events and the HTTP
// server's counters.
func (m *Metrics) buildEvents() []prometheus.Collector {
	changes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_status_changes_total",
		Help: "Contact status changes by previous and new status (NonQualified, Reachable, Unreachable, Removed).",
	}, []string{"from", "to"})
	for f := range statuses {
		for t := range statuses {
			m.changes[f][t] = changes.WithLabelValues(qualify.Status(f).String(), qualify.Status(t).String())
		}
	}
	avail := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_aor_availability_changes_total",
		Help: "AoRs becoming available (true) or unavailable (false).",
	}, []string{"available"})
	m.available = [2]prometheus.Counter{avail.WithLabelValues("false"), avail.WithLabelValues("true")}
	m.httpPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qualifyd_http_panics_total",
		Help: "HTTP handlers that panicked and were answered with 500.",
	})
	m.streamsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qualifyd_http_event_streams_refused_total",
		Help: "GET /api/v1/events streams refused with 503 because the most the server serves were open.",
	})
	return []prometheus.Collector{changes, avail, m.httpPanics, m.streamsRefused}
}

// ObserveEvent records one engine event: status changes by from and to,
// and AoR availability changes. Other kinds are ignored.
func (m *Metrics) ObserveEvent(ev engine.Event) {
	switch ev.Kind {
	case engine.StatusChanged:
		if int(ev.From) >= statuses || int(ev.To) >= statuses {
			return
		}
		m.changes[ev.From][ev.To].Inc()
		if m.aors != nil {
			m.aors.get(ev.AoR).changes[ev.To].Inc()
		}
	case engine.AvailabilityChanged:
		m.available[b2i(ev.Available)].Inc()
	}
}

// CountPanic counts an HTTP handler panic; web.Config.Panicked can be set
// to it.
func (m *Metrics) CountPanic() { m.httpPanics.Inc() }

// CountStreamRefused counts an event stream refused because the server
// served its most already; web.Config.StreamRefused can be set to it.
func (m *Metrics) CountStreamRefused() { m.streamsRefused.Inc() }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
