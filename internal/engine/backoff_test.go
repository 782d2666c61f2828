package engine

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// RFC 3261 section 17.1.2.2's timers, which space a UDP probe's
// retransmissions.
const (
	timerT1 = 500 * time.Millisecond
	timerT2 = 4 * time.Second
)

// floodGuard is a peer behind a guard against a source that floods it,
// as a Fritzbox's or Kamailio's pike: a datagram that arrives while more
// than limit of the source's datagrams (ignored ones included) arrived
// within the last window is ignored. What the guard lets through is
// answered at once, but for the outage, when nothing is.
type floodGuard struct {
	limit          int
	window         time.Duration
	outage, mended time.Duration // nothing answered in [outage, mended)

	mu      sync.Mutex
	arrived map[string][]time.Duration // per peer: offsets of every datagram
}

// probe plays one UDP probe of uri sent at offset at with deadline
// timeout: its transmissions (at, then T1, 3·T1, ... after it, the
// interval doubling up to T2, before the deadline) reach the guard one by
// one until one is let through outside the outage and answered.
func (g *floodGuard) probe(uri string, at, timeout time.Duration) reply {
	g.mu.Lock()
	defer g.mu.Unlock()
	for off, gap := time.Duration(0), timerT1; off < timeout; off, gap = off+gap, min(2*gap, timerT2) {
		if g.admit(uri, at+off) && (at+off < g.outage || at+off >= g.mended) {
			return reply{After: off + 10*time.Millisecond}
		}
	}
	return reply{Silent: true}
}

// admit counts a datagram of uri arriving at t and reports whether the
// guard lets it through: at most limit within the window, it included.
func (g *floodGuard) admit(uri string, t time.Duration) bool {
	g.arrived[uri] = append(g.arrived[uri], t)
	n := 0
	for _, a := range g.arrived[uri] {
		if a > t-g.window {
			n++
		}
	}
	return n <= g.limit
}

// recovery is what a run against flood guards measured.
type recovery struct {
	down      int           // contacts made Unreachable by the outage
	recovered int           // of them, Reachable again by the run's end
	slowest   time.Duration // longest from the outage's end to Reachable
}

// runFloodGuards qualifies peers trunks behind flood guards with policy p
// through a 15 s outage at 100 s, for 400 s (the field's soak: 4.5
// minutes after the outage), the first probes spread over F.
func runFloodGuards(t *testing.T, peers int, p qualify.Policy) recovery {
	var r recovery
	synctest.Test(t, func(t *testing.T) {
		g := &floodGuard{limit: 5, window: 10 * time.Second, outage: 100 * time.Second, mended: 115 * time.Second,
			arrived: map[string][]time.Duration{}}
		rng := rand.New(rand.NewPCG(36, 5))
		h := newHarness(t, Config{Rand: rng.Float64}, func(uri string, at time.Duration) reply {
			return g.probe(uri, at, p.ProbeTimeout())
		})
		aors := make([]AoR, peers)
		for i := range aors {
			aors[i] = AoR{Name: fmt.Sprintf("pbx%03d", i), Contacts: []string{fmt.Sprintf("sip:pbx@192.0.2.%d:5060", i+1)}, Policy: &p}
		}
		h.apply(aors...)
		h.until(400 * time.Second)
		down := map[string]bool{}
		for _, ev := range h.eventsOf(StatusChanged) {
			switch {
			case ev.To == qualify.Unreachable:
				down[ev.URI] = true
			case down[ev.URI] && ev.To == qualify.Reachable:
				r.recovered++
				r.slowest = max(r.slowest, ev.Time.Sub(h.t0)-g.mended)
			}
		}
		r.down = len(down)
	})
	return r
}

// TestFloodGuardForgetsDownProbes is the story of the Fritzbox that
// ignores a source sending more than 5 datagrams in 10 s
// (qualify-semantics §7): after a 15 s outage, the down backoff probes
// a tripped peer gently enough that its guard forgets qualifyd, and each
// contact is Reachable again within T + max(F, R) + the guard's window
// of the outage's end; probed every R + T as D = R did, most of them
// stay Unreachable, their guards tripped for good.
func TestFloodGuardForgetsDownProbes(t *testing.T) {
	p := referencePolicy()
	backoff := runFloodGuards(t, 100, p)
	p.DownInterval = p.RetryInterval
	fixed := runFloodGuards(t, 100, p)
	t.Logf("down backoff: %d of 100 down, %d recovered, the slowest %v after the outage", backoff.down, backoff.recovered, backoff.slowest)
	t.Logf("qualify_down_interval=R: %d of 100 down, %d recovered, the slowest %v after the outage", fixed.down, fixed.recovered, fixed.slowest)
	if backoff.down == 0 || backoff.recovered != backoff.down {
		t.Errorf("down backoff: %d of %d recovered", backoff.recovered, backoff.down)
	}
	if bound := 3*time.Second + 30*time.Second + 10*time.Second; backoff.slowest > bound {
		t.Errorf("down backoff: the slowest recovered %v after the outage, want at most %v", backoff.slowest, bound)
	}
	if fixed.down == 0 || fixed.recovered*2 > fixed.down {
		t.Errorf("qualify_down_interval=R: %d of %d recovered; the guards should hold most", fixed.recovered, fixed.down)
	}
}
