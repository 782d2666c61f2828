package daemon

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// notices collects what the daemon tells its service manager.
type notices struct {
	mu     sync.Mutex
	states []string
	more   chan struct{} // a receive follows each new state
}

func (n *notices) add(s string) error {
	n.mu.Lock()
	n.states = append(n.states, s)
	n.mu.Unlock()
	select {
	case n.more <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until a state equal to want has been sent, and returns
// every state so far. The test's own deadline bounds a broken run.
func (n *notices) waitFor(t *testing.T, want string) []string {
	t.Helper()
	for {
		n.mu.Lock()
		states := slices.Clone(n.states)
		n.mu.Unlock()
		if slices.Contains(states, want) {
			return states
		}
		select {
		case <-n.more:
		case <-t.Context().Done():
			t.Fatalf("no %q in %q", want, states)
		}
	}
}

// TestNotify: the daemon says READY=1 with its size once it runs, feeds
// the watchdog, says its new size after a reload and STOPPING=1 when it
// stops; READY=1 comes first.
func TestNotify(t *testing.T) {
	conf := deadTrunk(t)
	n := &notices{more: make(chan struct{}, 1)}
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0",
		Notify: n.add, Watchdog: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	ready := "READY=1\nSTATUS=qualifying 1 contacts of 1 AoRs"
	if states := n.waitFor(t, "WATCHDOG=1"); states[0] != ready {
		t.Fatalf("first state %q, want %q", states[0], ready)
	}
	conf.AoRs = append(conf.AoRs, pjsip.AoR{AoR: conf.AoRs[0].AoR})
	conf.AoRs[1].Name = "dead-2"
	if err := d.Reload(ctx, false); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "STATUS=qualifying 2 contacts of 2 AoRs")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "STOPPING=1")
}

// TestStopDuringSIGHUPReload: a stop that comes while a SIGHUP's reload
// runs ends Run, whichever of the stop and the HTTP front's end the
// signal loop sees first once the reload is done (it once hung when it
// saw the front's end: Run then waited for it a second time). Each round
// reloads on SIGHUP with a configuration read only after the stop and
// after the HTTP front has stopped, so that the loop finds both ready.
func TestStopDuringSIGHUPReload(t *testing.T) {
	const rounds = 20 // the loop takes either at random: the old hang came in round 3
	for i := range rounds {
		conf := deadTrunk(t)
		n := &notices{more: make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(t.Context())
		var d *Daemon
		var loads atomic.Int32
		load := func() (*pjsip.Config, error) {
			if loads.Add(1) == 2 { // the SIGHUP's reload, in the signal loop
				cancel()
				<-d.httpDone
			}
			return conf, nil
		}
		var err error
		d, err = New(Config{Load: load, SIPBind: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Notify: n.add})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		n.waitFor(t, "READY=1\nSTATUS=qualifying 1 contacts of 1 AoRs")
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Run: %v", i, err)
			}
		case <-time.After(30 * time.Second): // only ends a hung run
			t.Fatalf("round %d: Run still running 30 s after a stop during a SIGHUP's reload", i)
		}
	}
}
