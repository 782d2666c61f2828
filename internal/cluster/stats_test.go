package cluster

import (
	"testing"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// sendingNow is how many votes and verdicts n's publisher is writing.
func (n *testNode) sendingNow() (sending, queued int) {
	n.c.l.mu.Lock()
	defer n.c.l.mu.Unlock()
	return n.c.l.sending, len(n.c.l.votesOut) + len(n.c.l.recordsOut)
}

// TestStatsCountWhatNATSHasNotTaken: Stats counts the votes NATS has not
// taken, whether they wait in the queue or are being written, so that
// the pending gauge holds while NATS is away; it gives back SetProbes.
func TestStatsCountWhatNATSHasNotTaken(t *testing.T) {
	n := startCluster(t, 2, Majority)[0]
	n.c.SetProbes(2)
	n.c.Report("t/sip:10.0.0.1:5060", qualify.Reachable) // one vote of two: no verdict to record
	waitFor(t, 2*testTTL, "NATS takes the vote", func() bool { return n.c.Stats().Pending == 0 })
	if s := n.c.Stats(); s.Probes != 2 {
		t.Errorf("Stats().Probes = %d, want SetProbes' 2", s.Probes)
	}
	n.killServer()
	n.c.Report("t/sip:10.0.0.1:5060", qualify.Unreachable)
	n.c.Report("t/sip:10.0.0.2:5060", qualify.Unreachable)
	waitFor(t, 2*testTTL, "the publisher writes the two votes", func() bool { s, _ := n.sendingNow(); return s == 2 })
	if p := n.c.Stats().Pending; p != 2 {
		t.Errorf("while the publisher writes the votes NATS cannot take: Pending %d, want 2", p)
	}
	waitFor(t, 2*testTTL, "the refused votes go back to the queue", func() bool { s, q := n.sendingNow(); return s == 0 && q == 2 })
	if p := n.c.Stats().Pending; p != 2 {
		t.Errorf("with the refused votes queued again: Pending %d, want 2", p)
	}
}
