package cluster

import (
	"testing"
	"time"
)

// TestFullStoreLeavesTheCluster: the leader's store fills up and its
// embedded server disables its JetStream, as NATS does on a write that
// finds no space. The node gives the lease up and says it is out of the
// cluster with the reason; the others see its membership lapse (its
// votes stop counting) and one of them leads. Once the store has room
// again, the node enables its JetStream and rejoins.
func TestFullStoreLeavesTheCluster(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	waitFor(t, 10*testTTL, "one leader", func() bool { return len(leaders(nodes)) == 1 })
	full := leaders(nodes)[0]
	var rest []*testNode
	for _, n := range nodes {
		if n != full {
			rest = append(rest, n)
		}
	}
	full.c.mu.Lock()
	full.c.free = func(string) (uint64, error) { return 0, nil }
	full.c.mu.Unlock()
	disabled := time.Now()
	if err := full.c.server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	out := waitFor(t, 4*testTTL, full.cfg.Self+" gives the lease up and says it cannot store", func() bool {
		v := full.c.View()
		return !v.Leading && !v.InCluster && v.Store != "" && full.c.Vouch() != nil
	})
	t.Logf("%s out of the cluster %v after its JetStream was disabled: %s", full.cfg.Self, out, full.c.View().Store)
	took := waitFor(t, 10*testTTL, "the others count it out and one of them leads", func() bool {
		for _, n := range rest {
			for _, m := range n.c.View().Members {
				if m.Name == full.cfg.Self && m.Up {
					return false
				}
			}
		}
		return len(leaders(rest)) == 1
	})
	t.Logf("%s leads, %s counted out, %v after %s's JetStream was disabled", leaders(rest)[0].cfg.Self, full.cfg.Self, time.Since(disabled), full.cfg.Self)
	_ = took
	full.c.mu.Lock()
	full.c.free = freeSpace
	full.c.mu.Unlock()
	freed := time.Now()
	waitFor(t, 10*testTTL, full.cfg.Self+" stores and rejoins", func() bool {
		if v := full.c.View(); !v.InCluster || v.Store != "" {
			return false
		}
		for _, n := range rest {
			if upCount(n.c.View()) != 3 {
				return false
			}
		}
		return true
	})
	t.Logf("%s back in the cluster %v after its store had room again", full.cfg.Self, time.Since(freed))
}
