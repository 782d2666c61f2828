package engine

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// stepWall returns t with its wall clock reading moved by d and its
// monotonic reading kept: what time.Now returns after the system clock
// was stepped by d (NTP step at boot, an operator's date -s, VM resume).
func stepWall(t time.Time, d time.Duration) time.Time {
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	mono := (*layout)(unsafe.Pointer(&t)).ext
	u := t.Add(d)
	(*layout)(unsafe.Pointer(&u)).ext = mono
	return u
}

func TestStepWallHelper(t *testing.T) {
	a := time.Now()
	b := stepWall(a, time.Hour)
	if b.Sub(a) != 0 || b.UnixNano()-a.UnixNano() != int64(time.Hour) {
		t.Fatalf("helper: monotonic difference %v, wall difference %v; want 0 and 1h", b.Sub(a), time.Duration(b.UnixNano()-a.UnixNano()))
	}
}

// clockProber is a DatagramProber for the clock test: "live" answers 50
// ms after each first send, "dead" never does. Answers carry the
// receive time of now.
type clockProber struct {
	asyncFake
	now    func() time.Time // the receive clock
	answer func(uint64, qualify.Answer) qualify.Match

	mu    sync.Mutex
	first map[string]int             // first transmissions by URI
	steps map[string][]time.Duration // elapsed of every Step by URI
}

var clockDest = netip.MustParseAddrPort("192.0.2.1:5060")

func (p *clockProber) Datagram(qualify.Target) (netip.AddrPort, bool) { return clockDest, true }
func (p *clockProber) AnswerDatagrams(f func(uint64, qualify.Answer) qualify.Match) {
	p.answer = f
}
func (p *clockProber) Step(t qualify.Target, key uint64, elapsed time.Duration, _ bool) (time.Duration, qualify.Result, bool) {
	p.mu.Lock()
	p.steps[t.URI] = append(p.steps[t.URI], elapsed)
	if elapsed == 0 {
		p.first[t.URI]++
	}
	p.mu.Unlock()
	if elapsed >= t.Timeout {
		return 0, qualify.Result{Reason: qualify.ReasonTimeout, Transport: "udp", Dest: clockDest}, true
	}
	if elapsed == 0 && t.URI == "sip:live@192.0.2.1" {
		time.AfterFunc(50*time.Millisecond, func() {
			p.answer(key, qualify.Answer{From: clockDest, Code: 200, At: p.now()})
		})
	}
	return min(min(elapsed+500*time.Millisecond, 4*time.Second), t.Timeout-elapsed), qualify.Result{}, false
}

// TestWallClockStep: the system clock is stepped by an hour, forward
// or back, 0.3 s after the engine (and the prober) started; the first
// probes are due at 0.5 s. F = 1 s, timeout 1 s, R = 1 s. The live
// contact must be probed every second (0.5, 1.5, 2.5 s) with an RTT of
// 50 ms, and the dead one's first probe must be sent at 0 and 0.5 s and
// time out at 1 s: the slots keep time on the monotonic clock, as the
// scheduler does.
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
	clock := func() time.Time { return stepWall(base.Add(time.Since(t0)), time.Duration(offset.Load())) }
	var rtts []time.Duration
	var mu sync.Mutex
	// The prober's receive times: its epoch, taken before the step, plus
	// the monotonic time since, as sipprobe's table has them.
	p := &clockProber{asyncFake: asyncFake{&fakeProber{}}, now: func() time.Time { return base.Add(time.Since(t0)) },
		first: map[string]int{}, steps: map[string][]time.Duration{}}
	e, err := New(Config{Prober: p, Rand: func() float64 { return 0.5 }, // first probes at 0.5 s
		Now: clock,
		Observe: func(_ string, r qualify.Result, ok bool, _ qualify.Reason) {
			if ok {
				mu.Lock()
				rtts = append(rtts, r.RTT)
				mu.Unlock()
			}
		}})
	pol := qualify.Policy{Frequency: time.Second, Timeout: time.Second, Failures: 1, RetryInterval: time.Second}
	cancel, done := runAoR(t, e, err, pol, "sip:live@192.0.2.1", "sip:dead@192.0.2.2")
	time.Sleep(300 * time.Millisecond)
	offset.Store(int64(step)) // the clock steps while the engine runs, before the first probes
	time.Sleep(2600 * time.Millisecond)
	cancel()
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if live := p.first["sip:live@192.0.2.1"]; live != 3 {
		t.Errorf("live contact probed %d times by 2.9 s at F = 1 s from 0.5 s, want 3", live)
	}
	if want := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}; !slices.Equal(rtts, want) {
		t.Errorf("RTTs %v, want %v", rtts, want)
	}
	if dead := p.steps["sip:dead@192.0.2.2"]; len(dead) < 3 || !slices.Equal(dead[:3], []time.Duration{0, 500 * time.Millisecond, time.Second}) {
		t.Errorf("dead contact's first probe stepped at %v, want 0, 500ms, 1s (timeout)", dead)
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
