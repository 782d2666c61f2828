package asterisk

import (
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestLines(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	base := engine.Event{AoR: "pbx07", URI: "sip:pbx07@192.0.2.7:5060", Time: t0, FailureThreshold: 3, SuccessThreshold: 2}
	with := func(f func(*engine.Event)) engine.Event { ev := base; f(&ev); return ev }
	for _, tc := range []struct {
		ev   engine.Event
		want string
	}{
		{with(func(e *engine.Event) {
			e.Kind, e.From, e.To, e.Result.RTT = engine.StatusChanged, qualify.NonQualified, qualify.Reachable, 12345*time.Microsecond
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Reachable.  RTT: 12.345 msec"},
		{with(func(e *engine.Event) {
			e.Kind, e.From, e.To = engine.StatusChanged, qualify.Reachable, qualify.Unreachable
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Unreachable.  RTT: 0.000 msec"},
		{with(func(e *engine.Event) {
			e.Kind, e.To, e.LatencyOnly = engine.StatusChanged, qualify.Unreachable, true
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Unreachable (latency only, still routable).  RTT: 0.000 msec"},
		{with(func(e *engine.Event) {
			e.Kind, e.To = engine.StatusChanged, qualify.Removed
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Removed.  RTT: 0.000 msec"},
		{with(func(e *engine.Event) {
			e.Kind, e.Reason, e.Failures, e.Next = engine.ProbeFailed, qualify.ReasonTimeout, 1, t0.Add(2*time.Second)
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 qualify failed (timeout): 1/3 failures, retrying in 2s"},
		{with(func(e *engine.Event) {
			e.Kind, e.Reason, e.Result.Code, e.Failures, e.Next = engine.ProbeFailed, qualify.ReasonStatus, 503, 2, t0.Add(1500*time.Millisecond)
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 qualify failed (status 503): 2/3 failures, retrying in 1.5s"},
		{with(func(e *engine.Event) {
			e.Kind, e.Successes, e.Next, e.Result.RTT = engine.RecoveryProgress, 1, t0.Add(2*time.Second), 800*time.Microsecond
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 qualify succeeded: 1/2 successes, next in 2s.  RTT: 0.800 msec"},
		{with(func(e *engine.Event) {
			e.Kind, e.Draining, e.Next = engine.DrainChanged, true, t0.Add(20*time.Second)
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is draining (503 with Retry-After): out of routing for 20s"},
		{with(func(e *engine.Event) {
			e.Kind, e.Draining, e.LatencyOnly, e.Next = engine.DrainChanged, true, true, t0.Add(20*time.Second)
		}), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is draining (503 with Retry-After): latency only, still routable for 20s"},
		{with(func(e *engine.Event) { e.Kind = engine.DrainChanged }), "Contact pbx07/sip:pbx07@192.0.2.7:5060 is no longer draining"},
	} {
		got, ok := Line(tc.ev)
		if !ok || got != tc.want {
			t.Errorf("got %q (%v)\nwant %q", got, ok, tc.want)
		}
	}
	if _, ok := Line(engine.Event{Kind: engine.AvailabilityChanged}); ok {
		t.Error("availability events print no contact line")
	}
	if got := EndpointLine("pbx07", false); got != "Endpoint pbx07 is now Unreachable" {
		t.Errorf("endpoint line %q", got)
	}
}
