package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// noProber fails the test if the engine probes by itself.
type noProber struct{ t *testing.T }

func (p noProber) Probe(context.Context, qualify.Target) qualify.Result {
	p.t.Error("a driven engine called its Prober")
	return qualify.Result{}
}

// driven is an engine driven by hand in virtual time.
type driven struct {
	t   *testing.T
	t0  time.Time
	now time.Time
	e   *Engine
	d   *Driver
	sub *Subscription
}

func newDriven(t *testing.T) *driven {
	h := &driven{t: t, t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.now = h.t0
	e, err := New(Config{Prober: noProber{t}, Rand: func() float64 { return 0 }, Now: func() time.Time { return h.now }})
	if err != nil {
		t.Fatal(err)
	}
	h.e, h.d, h.sub = e, e.Driver(), e.Subscribe(1024)
	return h
}

// step starts the next due probe and completes it with the peer's answer:
// silent peers time out after T, others answer in 10 ms.
func (h *driven) step(silent func(at time.Duration) bool) Job {
	h.t.Helper()
	due, ok := h.d.Next()
	if !ok {
		h.t.Fatal("nothing due")
	}
	h.now = due
	jobs := h.d.Start(due, 10, nil)
	if len(jobs) != 1 {
		h.t.Fatalf("started %d probes at %v, want 1", len(jobs), due.Sub(h.t0))
	}
	res := qualify.Result{Sent: due, Code: 200, RTT: 10 * time.Millisecond}
	end := due.Add(res.RTT)
	if silent(due.Sub(h.t0)) {
		res = qualify.Result{Sent: due, Reason: qualify.ReasonTimeout}
		end = due.Add(jobs[0].Target.Timeout)
	}
	h.now = end
	h.d.Complete(jobs[0].ID, end, res)
	return jobs[0]
}

func TestDriverReferenceTimeline(t *testing.T) {
	// The contract's reference timeline, stepped by hand: answers at 0, 30
	// and 60 s, silent from 89 s; Unreachable at 103 s, then probed every
	// 2 s after each timeout.
	h := newDriven(t)
	if err := h.e.Apply([]AoR{{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())}}); err != nil {
		t.Fatal(err)
	}
	silent := func(at time.Duration) bool { return at >= 89*time.Second }
	var sent []time.Duration
	for range 8 {
		sent = append(sent, h.step(silent).Due.Sub(h.t0))
	}
	if want := durations(0, 30, 60, 90, 95, 100, 105, 110); !slices.Equal(sent, want) {
		t.Fatalf("probes at %v, want %v", sent, want)
	}
	var down time.Duration
	for len(h.sub.C) > 0 {
		ev := <-h.sub.C
		if ev.Kind == StatusChanged && ev.To == qualify.Unreachable {
			down = ev.Time.Sub(h.t0)
		}
	}
	if down != 103*time.Second {
		t.Fatalf("Unreachable at %v, want 103s", down)
	}
	if c := h.e.Counters(); c.Probes[qualify.ReasonNone] != 3 || c.Probes[qualify.ReasonTimeout] != 5 || c.InFlight != 0 {
		t.Fatalf("counters %+v", c)
	}
}

func TestDriverRemovedWhileRunning(t *testing.T) {
	// A contact removed by a reload while its driven probe runs is
	// released when the probe completes; its result is not applied.
	h := newDriven(t)
	aor := AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())}
	if err := h.e.Apply([]AoR{aor}); err != nil {
		t.Fatal(err)
	}
	jobs := h.d.Start(h.t0, 10, nil)
	if err := h.e.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if next := h.d.Complete(jobs[0].ID, h.t0, qualify.Result{Sent: h.t0, Code: 200}); !next.IsZero() {
		t.Fatalf("removed contact due again at %v", next)
	}
	if err := h.e.Apply([]AoR{aor}); err != nil {
		t.Fatal(err)
	}
	if jobs := h.d.Start(h.t0, 10, nil); len(jobs) != 1 || jobs[0].ID != 0 {
		t.Fatalf("after release: started %+v, want the freed slot 0 reused", jobs)
	}
	if c := h.e.Counters(); c.Probes[qualify.ReasonNone] != 0 {
		t.Fatalf("the removed contact's result was applied: %+v", c)
	}
}
