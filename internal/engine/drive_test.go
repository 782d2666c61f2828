package engine

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// handProbe is a probe started by a driven engine, which the test ends.
type handProbe struct {
	tag    uint64
	target probe.Target
	start  time.Time
	done   func(uint64, qualify.Result)
}

// driven is an engine driven by hand in virtual time, with a prober that
// only records the probes started.
type driven struct {
	t       *testing.T
	t0      time.Time
	now     time.Time
	e       *Engine
	d       *Driver
	sub     *Subscription
	started []handProbe
}

func newDriven(t *testing.T) *driven {
	h := &driven{t: t, t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.now = h.t0
	e, err := New(Config{Prober: h, Rand: func() float64 { return 0 }, Now: func() time.Time { return h.now }})
	if err != nil {
		t.Fatal(err)
	}
	h.e, h.d, h.sub = e, e.Drive(t.Context()), e.Subscribe(1024)
	return h
}

func (h *driven) Start(_ context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	h.started = append(h.started, handProbe{tag, t, h.now, done})
}

// startAt sets the clock to at, starts the due probes and returns them.
func (h *driven) startAt(at time.Time) []handProbe {
	h.now = at
	h.started = h.started[:0]
	h.d.StartDue()
	return slices.Clone(h.started)
}

// step starts the next due probe and ends it with the peer's answer:
// silent peers time out after T, others answer in 10 ms.
func (h *driven) step(silent func(at time.Duration) bool) handProbe {
	h.t.Helper()
	due, ok := h.d.Next()
	if !ok {
		h.t.Fatal("nothing due")
	}
	probes := h.startAt(due)
	if len(probes) != 1 {
		h.t.Fatalf("started %d probes at %v, want 1", len(probes), due.Sub(h.t0))
	}
	p := probes[0]
	res := qualify.Result{Sent: due, Code: 200, RTT: 10 * time.Millisecond}
	end := due.Add(res.RTT)
	if silent(due.Sub(h.t0)) {
		res = qualify.Result{Sent: due, Reason: qualify.ReasonTimeout}
		end = due.Add(p.target.Timeout)
	}
	h.now = end
	p.done(p.tag, res)
	return p
}

func TestDriverReferenceTimeline(t *testing.T) {
	// The contract's reference timeline (qualify-semantics §9), stepped by
	// hand: answers at 0, 30 and 60 s, silent from 89 s; Unreachable at
	// 103 s, then probed 2, 4, 8, ... s after each timeout (the down
	// backoff).
	h := newDriven(t)
	if err := h.e.Apply([]AoR{{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())}}); err != nil {
		t.Fatal(err)
	}
	silent := func(at time.Duration) bool { return at >= 89*time.Second }
	var sent []time.Duration
	for range 8 {
		sent = append(sent, h.step(silent).start.Sub(h.t0))
	}
	if want := durations(0, 30, 60, 90, 95, 100, 105, 112); !slices.Equal(sent, want) {
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
	// released when the probe ends; its result is not applied.
	h := newDriven(t)
	aor := AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())}
	if err := h.e.Apply([]AoR{aor}); err != nil {
		t.Fatal(err)
	}
	probes := h.startAt(h.t0)
	if err := h.e.Apply(nil); err != nil {
		t.Fatal(err)
	}
	probes[0].done(probes[0].tag, qualify.Result{Sent: h.t0, Code: 200})
	if _, ok := h.d.Next(); ok {
		t.Fatal("a removed contact is due again")
	}
	if err := h.e.Apply([]AoR{aor}); err != nil {
		t.Fatal(err)
	}
	if probes := h.startAt(h.t0); len(probes) != 1 || probes[0].tag != 0 {
		t.Fatalf("after release: started %+v, want the freed slot 0 reused", probes)
	}
	if c := h.e.Counters(); c.Probes[qualify.ReasonNone] != 0 {
		t.Fatalf("the removed contact's result was applied: %+v", c)
	}
}

func TestDriverResultAfterCancel(t *testing.T) {
	// Once Drive's context is cancelled, a probe's result is not applied
	// and the contact is not due again.
	h := &driven{t: t, t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.now = h.t0
	e, err := New(Config{Prober: h, Rand: func() float64 { return 0 }, Now: func() time.Time { return h.now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h.e, h.d = e, e.Drive(ctx)
	if err := e.Apply([]AoR{{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())}}); err != nil {
		t.Fatal(err)
	}
	p := h.startAt(h.t0)[0]
	cancel()
	p.done(p.tag, qualify.Result{Sent: h.t0, Code: 200})
	if c := e.Counters(); c.Probes[qualify.ReasonNone] != 0 || c.InFlight != 0 {
		t.Fatalf("counters %+v, want nothing applied and nothing in flight", c)
	}
	if _, ok := h.d.Next(); ok {
		t.Fatal("due again after the cancellation")
	}
}

// instant answers every probe with 200 OK before its Start returns.
type instant struct{}

func (instant) Start(_ context.Context, _ probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	done(tag, qualify.Result{Code: 200, RTT: time.Millisecond})
}

// BenchmarkProbe is one probe of a driven engine of 1,000 contacts, from
// the scheduler's job to the applied result and the next due time, with
// a prober that costs nothing: the engine's own cost per probe, which
// allocates nothing. Each contact is an AoR of its own, with a history
// (the default Config.HistoryAoRs).
func BenchmarkProbe(b *testing.B) { benchProbe(b, Config{}) }

// BenchmarkNoHistoryProbe is BenchmarkProbe without histories: the
// statistics' cost alone.
func BenchmarkNoHistoryProbe(b *testing.B) { benchProbe(b, Config{HistoryAoRs: -1}) }

// benchProbe is BenchmarkProbe of an engine of cfg.
func benchProbe(b *testing.B, cfg Config) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg.Prober, cfg.Now = instant{}, func() time.Time { return now }
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := referencePolicy()
	aors := make([]AoR, 1000)
	for i := range aors {
		u := "sip:c" + strconv.Itoa(i) + "@192.0.2.1"
		aors[i] = AoR{Name: u[4:], Contacts: []string{u}, Policy: &p}
	}
	if err := e.Apply(aors); err != nil {
		b.Fatal(err)
	}
	d := e.Drive(b.Context())
	b.ReportAllocs()
	for b.Loop() {
		now, _ = d.Next()
		d.StartDue()
	}
	if c := e.Counters(); c.Probes[qualify.ReasonNone] < uint64(b.N) {
		b.Fatalf("%d probes applied in %d steps", c.Probes[qualify.ReasonNone], b.N)
	}
}

// lossy answers every probe before its Start returns, 200 OK but every
// 100th a timeout: 1% loss, so that about one probe in a hundred begins
// a run of failures and the retry that follows ends it.
type lossy struct{ n atomic.Uint64 }

func (l *lossy) Start(_ context.Context, _ probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	if l.n.Add(1)%100 == 0 {
		done(tag, qualify.Result{Reason: qualify.ReasonTimeout})
		return
	}
	done(tag, qualify.Result{Code: 200, RTT: time.Millisecond})
}

// BenchmarkLossyProbe1M is one probe of a driven engine of a million
// contacts (each an AoR of its own, no histories) at 1% loss, with one
// subscriber draining the events as the daemon's sink feed does: with
// the FailuresCleared edge the panic's census needs (cleared) and
// without it (baseline), in the same run. Compare the two ns/op.
func BenchmarkLossyProbe1M(b *testing.B) {
	for _, c := range []struct {
		name    string
		without bool
	}{{"baseline", true}, {"cleared", false}} {
		b.Run(c.name, func(b *testing.B) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			e, err := New(Config{Prober: &lossy{}, Now: func() time.Time { return now }, HistoryAoRs: -1})
			if err != nil {
				b.Fatal(err)
			}
			e.noCleared = c.without
			p := referencePolicy()
			err = e.ApplyFunc(1_000_000, func(i int) *AoR {
				u := "sip:c" + strconv.Itoa(i) + "@192.0.2.1"
				return &AoR{Name: u[4:], Contacts: []string{u}, Policy: &p}
			})
			if err != nil {
				b.Fatal(err)
			}
			sub := e.Subscribe(1 << 16)
			var events atomic.Uint64
			drained := make(chan struct{})
			go func() {
				for range sub.C {
					events.Add(1)
				}
				close(drained)
			}()
			d := e.Drive(b.Context())
			for e.Counters().Probes[qualify.ReasonNone] < 1_100_000 { // past every first verdict
				now, _ = d.Next()
				d.StartDue()
			}
			probes := e.Counters().Probes
			before := probes[qualify.ReasonNone] + probes[qualify.ReasonTimeout]
			seen := events.Load() + sub.Dropped()
			b.ResetTimer()
			for b.Loop() {
				now, _ = d.Next()
				d.StartDue()
			}
			b.StopTimer()
			sub.Close()
			<-drained
			probes = e.Counters().Probes
			n := probes[qualify.ReasonNone] + probes[qualify.ReasonTimeout] - before
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(n, 1)), "ns/probe")
			b.ReportMetric(float64(events.Load()+sub.Dropped()-seen)/float64(max(n, 1))*100, "events/100probes")
		})
	}
}
