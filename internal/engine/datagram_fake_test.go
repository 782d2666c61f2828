package engine

import (
	"cmp"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// datagramProbes makes newHarness's prober a DatagramProber.
var datagramProbes bool

// fakeDest is where the datagram fake's probes go and its answers come
// from.
var fakeDest = netip.MustParseAddrPort("192.0.2.1:5060")

// Timer E of the fake, as RFC 3261 section 17.1.2.2 has it.
const (
	fakeT1 = 500 * time.Millisecond
	fakeT2 = 4 * time.Second
)

// datagramFake plays the fake prober's script through the DatagramProber
// interface: the engine times each probe, the fake answers it from a
// timer of its own, as a peer on the network would. A URI with
// ";transport=tcp" is not a datagram probe and goes through Start.
type datagramFake struct {
	asyncFake
	answer func(uint64, qualify.Answer) qualify.Match

	mu    sync.Mutex
	steps []fakeStep
}

// fakeStep is one call of Step.
type fakeStep struct {
	uri        string
	key        uint64
	elapsed    time.Duration
	proceeding bool
}

func newDatagramFake(p *fakeProber) *datagramFake { return &datagramFake{asyncFake: asyncFake{p}} }

func (f *datagramFake) Datagram(t qualify.Target) (netip.AddrPort, bool) {
	return fakeDest, !strings.Contains(t.URI, ";transport=tcp")
}

func (f *datagramFake) AnswerDatagrams(a func(uint64, qualify.Answer) qualify.Match) { f.answer = a }

func (f *datagramFake) Step(t qualify.Target, key uint64, elapsed time.Duration, proceeding bool) (time.Duration, qualify.Result, bool) {
	f.mu.Lock()
	f.steps = append(f.steps, fakeStep{t.URI, key, elapsed, proceeding})
	f.mu.Unlock()
	if elapsed >= t.Timeout {
		return 0, qualify.Result{Reason: qualify.ReasonTimeout, Detail: "no response", Transport: "udp", Dest: fakeDest}, true
	}
	if elapsed == 0 {
		f.first(t, key)
	}
	return fakeTimerE(elapsed, proceeding, t.Timeout), qualify.Result{}, false
}

// first plays the script for the first transmission of probe key.
func (f *datagramFake) first(t qualify.Target, key uint64) {
	p := f.fakeProber
	now := time.Now()
	r := p.script(t.URI, now.Sub(p.t0))
	p.mu.Lock()
	p.sent = append(p.sent, sentProbe{t.URI, now.Sub(p.t0)})
	p.mu.Unlock()
	if r.Silent {
		return
	}
	time.AfterFunc(r.After, func() {
		f.answer(key, qualify.Answer{From: fakeDest, Code: cmp.Or(r.Code, 200), At: time.Now()})
	})
}

// fakeTimerE is the wait after an event elapsed after the first
// transmission: T1 doubling up to T2, T2 once proceeding, and never past
// the timeout.
func fakeTimerE(elapsed time.Duration, proceeding bool, timeout time.Duration) time.Duration {
	wait := min(elapsed+fakeT1, fakeT2)
	if proceeding {
		wait = fakeT2
	}
	return min(wait, timeout-elapsed)
}

// stepsOf returns the elapsed times of the steps of uri's probes.
func (f *datagramFake) stepsOf(uri string) []fakeStep {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeStep
	for _, s := range f.steps {
		if s.uri == uri {
			out = append(out, s)
		}
	}
	return out
}
