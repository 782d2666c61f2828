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
	// Calls is the state of the sink's call watcher (an ami sink with
	// observe_calls=yes); nil for a sink without one, which has no call
	// series.
	Calls *CallWatchStats
}

// CallWatchStats is the state of an ami sink's call watcher.
type CallWatchStats struct {
	// Up is whether its Manager session is logged in, reading calls.
	Up bool
	// Reconnects counts its sessions that failed or ended.
	Reconnects uint64
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
	descSinkCallsUp = prometheus.NewDesc("qualifyd_sink_calls_up",
		"1 while the ami sink's call watcher (observe_calls=yes) is logged in to the Manager, hearing the calls.", []string{"sink"}, nil)
	descSinkCallsReconnects = prometheus.NewDesc("qualifyd_sink_calls_reconnects_total",
		"Sessions of the ami sink's call watcher (observe_calls=yes) that failed or ended, each followed by a reconnect.", []string{"sink"}, nil)
)

// PanicStats is the daemon's panic state that the metrics export.
type PanicStats struct {
	// Active is true while qualifyd panics: the sinks push only ups.
	Active bool
	// Waiting is true while, short of a panic, more than
	// panic_hold_threshold percent of the destinations are recently
	// failing (their streak begun within the wait): a Down that follows
	// an Up waits for a panic a bounded time.
	Waiting bool
	// Destinations counts the distinct destinations qualified; Failing
	// those all of whose contacts failed their latest probe (down
	// included); Down those all of whose contacts are down.
	Destinations, Failing, Down int
}

var (
	descPanic = prometheus.NewDesc("qualifyd_panic",
		"1 while qualifyd panics: more than panic_threshold percent of its destinations are failing, and the sinks push only ups.", nil, nil)
	descPanicWaiting = prometheus.NewDesc("qualifyd_panic_waiting",
		"1 while, short of a panic, more than panic_hold_threshold percent of its destinations are recently failing (their streak began within the wait): a down that follows an up is held up for a bounded time, in case a panic is coming.", nil, nil)
	descDestinations = prometheus.NewDesc("qualifyd_destinations",
		"Distinct destinations (host:port of the qualified contacts) by state: all (every one), failing (all of its contacts failed their latest probe, down included) or down (all of its contacts down).", []string{"state"}, nil)
)

// WatchPanic registers with reg the panic series, read from state at
// scrape time.
func (m *Metrics) WatchPanic(reg prometheus.Registerer, state func() PanicStats) error {
	if reg == nil || state == nil {
		return errors.New("metrics: no registerer or no panic state")
	}
	return reg.Register(funcCollector{
		descs: []*prometheus.Desc{descPanic, descPanicWaiting, descDestinations},
		collect: func(ch chan<- prometheus.Metric) {
			p := state()
			ch <- prometheus.MustNewConstMetric(descPanic, prometheus.GaugeValue, gauge(p.Active))
			ch <- prometheus.MustNewConstMetric(descPanicWaiting, prometheus.GaugeValue, gauge(p.Waiting))
			ch <- prometheus.MustNewConstMetric(descDestinations, prometheus.GaugeValue, float64(p.Destinations), "all")
			ch <- prometheus.MustNewConstMetric(descDestinations, prometheus.GaugeValue, float64(p.Failing), "failing")
			ch <- prometheus.MustNewConstMetric(descDestinations, prometheus.GaugeValue, float64(p.Down), "down")
		},
	})
}

// WatchSinks registers with reg the sink series, read from sinks at
// scrape time; the sinks may change between scrapes (a reload).
func (m *Metrics) WatchSinks(reg prometheus.Registerer, sinks func() []SinkStats) error {
	if reg == nil || sinks == nil {
		return errors.New("metrics: no registerer or no sinks")
	}
	return reg.Register(funcCollector{
		descs: []*prometheus.Desc{descSinkUp, descSinkPushes, descSinkPending, descSinkLast, descSinkCallsUp, descSinkCallsReconnects},
		collect: func(ch chan<- prometheus.Metric) {
			for _, s := range sinks() {
				collectSink(ch, s)
			}
		},
	})
}

// collectSink sends one sink's series.
func collectSink(ch chan<- prometheus.Metric, s SinkStats) {
	ch <- prometheus.MustNewConstMetric(descSinkUp, prometheus.GaugeValue, gauge(s.Up), s.Name)
	ch <- prometheus.MustNewConstMetric(descSinkPending, prometheus.GaugeValue, float64(s.Pending), s.Name)
	ch <- prometheus.MustNewConstMetric(descSinkLast, prometheus.GaugeValue, unixSeconds(s.LastSuccess), s.Name)
	for _, r := range []struct {
		label string
		n     uint64
	}{{"ok", s.OK}, {"error", s.Error}, {"dropped", s.Dropped}} {
		ch <- prometheus.MustNewConstMetric(descSinkPushes, prometheus.CounterValue, float64(r.n), s.Name, r.label)
	}
	if c := s.Calls; c != nil {
		ch <- prometheus.MustNewConstMetric(descSinkCallsUp, prometheus.GaugeValue, gauge(c.Up), s.Name)
		ch <- prometheus.MustNewConstMetric(descSinkCallsReconnects, prometheus.CounterValue, float64(c.Reconnects), s.Name)
	}
}
