//go:build !race

// The smoke test probes 100,000 contacts over real sockets; under the race
// detector that is minutes of CPU, so `make smoke` runs it without -race.

package main

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// TestScaleSmoke runs the real engine and UDP prober with 100,000
// contacts, 10% of them silent, against an in-process responder until
// every contact was probed twice, and checks correctness only:
// no answered contact counted as failed, every contact in the status its
// peer deserves, and the heap under 1 KiB per contact. It asserts no
// timing; the wait is a generous bound against a hang.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("probes 100,000 contacts for about 10 s")
	}
	const n = 100_000
	pop := smokePopulation(t, n)
	heap0 := heapInUse()
	prober, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer prober.Close()
	tl, cd := &tally{}, newCountdown(2*n)
	observe := func(aor string, r qualify.Result, ok bool, reason qualify.Reason) {
		tl.observe(aor, r, ok, reason)
		cd.observe()
	}
	e, err := engine.New(engine.Config{Prober: prober, Observe: observe})
	if err != nil {
		t.Fatal(err)
	}
	policy := qualify.DefaultPolicy()
	policy.Frequency = 5 * time.Second
	if err := e.Apply(pop.aors(policy)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	cd.wait(t, time.Minute)
	if perContact := (heapInUse() - heap0) / n; perContact >= 1024 {
		t.Errorf("heap %d B per contact, want under 1 KiB", perContact)
	}
	if f := tl.falseTimeouts.Load(); f != 0 {
		t.Errorf("%d answered probes counted as failed", f)
	}
	if tl.deadTimeouts.Load() == 0 {
		t.Error("no silent contact timed out")
	}
	checkStatuses(t, e, pop)
}

// smokePopulation starts the live and silent responders.
func smokePopulation(t *testing.T, n int) *population {
	live, err := responder.ListenGroup("127.0.0.1", 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	dead, err := responder.ListenGroup("127.0.0.1", 2, func(netip.AddrPort) responder.Action { return responder.Action{Drop: true} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	return &population{n: n, deadShare: 0.1, live: live.Addrs(), dead: dead.Addrs()}
}

// countdown closes reached when the engine has applied n probes: the test
// waits on the engine's own Observe hook, not by polling.
type countdown struct {
	left    atomic.Int64
	reached chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{reached: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) observe() {
	if c.left.Add(-1) == 0 {
		close(c.reached)
	}
}

// wait returns once the count is reached; limit only stops a hung run.
func (c *countdown) wait(t *testing.T, limit time.Duration) {
	bound := time.NewTimer(limit)
	defer bound.Stop()
	select {
	case <-c.reached:
	case <-bound.C:
		t.Fatalf("%d probes still to apply after %v", c.left.Load(), limit)
	}
}

// checkStatuses: live contacts Reachable, silent ones Unreachable.
func checkStatuses(t *testing.T, e *engine.Engine, pop *population) {
	wrong := 0
	for _, c := range e.Contacts() {
		want := qualify.Reachable
		if c.URI[4] == 'd' {
			want = qualify.Unreachable
		}
		if c.Status != want && !c.InFlight {
			if wrong++; wrong <= 5 {
				t.Errorf("%s: %v, want %v", c.URI, c.Status, want)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d contacts in the wrong status", wrong, pop.n)
	}
}
