package daemon

import (
	"context"
	"slices"
	"sync"
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
