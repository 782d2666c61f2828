package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSinkSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stats := []SinkStats{{Name: "edge", Up: true, Pending: 2, LastSuccess: time.Unix(1764590400, 500e6), OK: 12, Error: 1},
		{Name: "pbx", Calls: &CallWatchStats{Reconnects: 3}}}
	if err := m.WatchSinks(reg, func() []SinkStats { return stats }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP qualifyd_sink_last_success_timestamp_seconds Unix time of the sink's last successful request; 0 if none.
# TYPE qualifyd_sink_last_success_timestamp_seconds gauge
qualifyd_sink_last_success_timestamp_seconds{sink="edge"} 1.7645904005e+09
qualifyd_sink_last_success_timestamp_seconds{sink="pbx"} 0
# HELP qualifyd_sink_pending Objects whose state in the router differs from qualifyd's.
# TYPE qualifyd_sink_pending gauge
qualifyd_sink_pending{sink="edge"} 2
qualifyd_sink_pending{sink="pbx"} 0
# HELP qualifyd_sink_pushes_total Pushes to the sink by result (ok, error, dropped).
# TYPE qualifyd_sink_pushes_total counter
qualifyd_sink_pushes_total{result="dropped",sink="edge"} 0
qualifyd_sink_pushes_total{result="error",sink="edge"} 1
qualifyd_sink_pushes_total{result="ok",sink="edge"} 12
qualifyd_sink_pushes_total{result="dropped",sink="pbx"} 0
qualifyd_sink_pushes_total{result="error",sink="pbx"} 0
qualifyd_sink_pushes_total{result="ok",sink="pbx"} 0
# HELP qualifyd_sink_up 1 when the sink is connected: the router answered its last request (a refusal included).
# TYPE qualifyd_sink_up gauge
qualifyd_sink_up{sink="edge"} 1
qualifyd_sink_up{sink="pbx"} 0
# HELP qualifyd_sink_calls_up 1 while the ami sink's call watcher (observe_calls=yes) is logged in to the Manager, hearing the calls.
# TYPE qualifyd_sink_calls_up gauge
qualifyd_sink_calls_up{sink="pbx"} 0
# HELP qualifyd_sink_calls_reconnects_total Sessions of the ami sink's call watcher (observe_calls=yes) that failed or ended, each followed by a reconnect.
# TYPE qualifyd_sink_calls_reconnects_total counter
qualifyd_sink_calls_reconnects_total{sink="pbx"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_sink_up", "qualifyd_sink_pending",
		"qualifyd_sink_pushes_total", "qualifyd_sink_last_success_timestamp_seconds",
		"qualifyd_sink_calls_up", "qualifyd_sink_calls_reconnects_total"); err != nil {
		t.Fatal(err)
	}
}

func TestPanicSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := PanicStats{Active: true, Destinations: 10, Failing: 7, Down: 4}
	if err := m.WatchPanic(reg, func() PanicStats { return p }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP qualifyd_destinations Distinct destinations (host:port of the qualified contacts) by state: all (every one), failing (all of its contacts failed their latest probe, down included) or down (all of its contacts down).
# TYPE qualifyd_destinations gauge
qualifyd_destinations{state="all"} 10
qualifyd_destinations{state="failing"} 7
qualifyd_destinations{state="down"} 4
# HELP qualifyd_panic 1 while qualifyd panics: more than panic_threshold percent of its destinations are failing, and the sinks push only ups.
# TYPE qualifyd_panic gauge
qualifyd_panic 1
# HELP qualifyd_panic_waiting 1 while, short of a panic, more than panic_hold_threshold percent of its destinations are recently failing (their streak began within the wait): a down that follows an up is held up for a bounded time, in case a panic is coming.
# TYPE qualifyd_panic_waiting gauge
qualifyd_panic_waiting 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_panic", "qualifyd_panic_waiting", "qualifyd_destinations"); err != nil {
		t.Fatal(err)
	}
}
