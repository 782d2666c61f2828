package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestStepWallHelper(t *testing.T) {
	a := time.Now()
	b := enginetest.StepWall(a, time.Hour)
	if b.Sub(a) != 0 || b.UnixNano()-a.UnixNano() != int64(time.Hour) {
		t.Fatalf("helper: monotonic difference %v, wall difference %v; want 0 and 1h", b.Sub(a), time.Duration(b.UnixNano()-a.UnixNano()))
	}
}

// clockProber is the prober of the clock test: "live" answers 50 ms after
// each send, with the RTT and send time of the prober's own clock; "dead"
// times out after t.Timeout with no send time, which the engine fills in.
type clockProber struct {
	t0  time.Time        // the bubble's start
	now func() time.Time // the prober's clock

	mu   sync.Mutex
	sent map[string][]time.Duration // send offsets from t0 by URI
}

const (
	liveURI = "sip:live@192.0.2.1"
	deadURI = "sip:dead@192.0.2.2"
)

func (p *clockProber) Start(_ context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	p.mu.Lock()
	p.sent[t.URI] = append(p.sent[t.URI], time.Since(p.t0))
	p.mu.Unlock()
	sent := p.now()
	if t.URI != liveURI {
		time.AfterFunc(t.Timeout, func() { done(tag, qualify.Result{Reason: qualify.ReasonTimeout}) })
		return
	}
	time.AfterFunc(50*time.Millisecond, func() {
		done(tag, qualify.Result{Sent: sent, RTT: p.now().Sub(sent), Code: 200})
	})
}

// TestWallClockStep: the system clock is stepped by an hour, forward
// or back, 0.3 s after the engine (and the prober) started; the first
// probes are due at 0.5 s. F = 1 s, timeout 1 s, R = 1 s. The live
// contact must be probed every second (0.5, 1.5, 2.5 s) with an RTT of
// 50 ms, its last probe's end kept on the monotonic clock (2.55 s after
// the epoch, not an hour off); the dead one's probe at 0.5 s times out at 1.5 s, its next one
// is at 2.5 s, and the send time the engine gives its failure is its
// start on the monotonic clock: the slots keep time on the monotonic
// clock, as the scheduler does.
func TestWallClockStep(t *testing.T) {
	base := time.Now() // a reading of the monotonic clock, which synctest's times lack
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { wallClockStep(t, base, step) })
		})
	}
}

// wallClockStep runs TestWallClockStep's case in a bubble: the clock is
// base plus the bubble's virtual time since it began, with its monotonic
// reading, and its wall reading moved by step from 0.3 s on.
func wallClockStep(t *testing.T, base time.Time, step time.Duration) {
	t0 := time.Now()
	var offset atomic.Int64
	clock := func() time.Time { return enginetest.StepWall(base.Add(time.Since(t0)), time.Duration(offset.Load())) }
	var rtts []time.Duration
	var mu sync.Mutex
	// The prober's clock: its epoch, taken before the step, plus the
	// monotonic time since, as sipprobe's table has it.
	p := &clockProber{t0: t0, now: func() time.Time { return base.Add(time.Since(t0)) }, sent: map[string][]time.Duration{}}
	e, err := New(Config{Prober: p, Rand: func() float64 { return 0.5 }, // first probes at 0.5 s
		Now: clock,
		Observe: func(_ string, r qualify.Result, ok bool, _ qualify.Reason) {
			if ok {
				mu.Lock()
				rtts = append(rtts, r.RTT)
				mu.Unlock()
			}
		}})
	sub := e.Subscribe(64)
	pol := qualify.Policy{Frequency: time.Second, Timeout: time.Second, Failures: 1, RetryInterval: time.Second}
	cancel, done := runAoR(t, e, err, pol, liveURI, deadURI)
	time.Sleep(300 * time.Millisecond)
	offset.Store(int64(step)) // the clock steps while the engine runs, before the first probes
	time.Sleep(2600 * time.Millisecond)
	cancel()
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if live := p.sent[liveURI]; !slices.Equal(live, durations(0.5, 1.5, 2.5)) {
		t.Errorf("live contact probed at %v by 2.9 s, want 0.5, 1.5, 2.5 s", live)
	}
	if want := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}; !slices.Equal(rtts, want) {
		t.Errorf("RTTs %v, want %v", rtts, want)
	}
	if dead := p.sent[deadURI]; !slices.Equal(dead, durations(0.5, 2.5)) {
		t.Errorf("dead contact probed at %v, want 0.5, 2.5 s", dead)
	}
	// The live contact's last probe, sent at 2.5 s, ended at 2.55 s on the
	// monotonic clock: its end reads as the epoch's wall time plus that
	// span, whatever the wall clock read at the end.
	a, _ := e.AoR("a")
	for _, c := range a.Contacts {
		if want := base.Add(2550 * time.Millisecond); c.URI == liveURI && c.Last.At.UnixNano() != want.UnixNano() {
			t.Errorf("live contact's last probe ended at %v, want %v: the epoch's wall plus 2.55 s on the monotonic clock",
				c.Last.At.Sub(base), want.Sub(base))
		}
	}
	sub.Close()
	var failedSent []time.Duration
	for ev := range sub.C {
		if ev.Kind == StatusChanged && ev.To == qualify.Unreachable {
			failedSent = append(failedSent, ev.Result.Sent.Sub(base)) // monotonic
		}
	}
	if !slices.Equal(failedSent, durations(0.5)) {
		t.Errorf("the dead contact's failure was sent at %v, want 0.5 s", failedSent)
	}
}

// runAoR fails the test on err from New, applies one AoR "a" of contacts
// under pol to e, and runs e until cancel; done is closed when Run
// returns.
func runAoR(t *testing.T, e *Engine, err error, pol qualify.Policy, contacts ...string) (cancel func(), done <-chan struct{}) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply([]AoR{{Name: "a", Contacts: contacts, Policy: &pol}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan struct{})
	go func() { e.Run(ctx); close(ch) }()
	return cancel, ch
}
