package cluster

import (
	"testing"
	"time"
)

// TestElectionGraceEndsAtARenewal: a renewal that failed while the node
// reached a majority gives the node an election's grace past its
// deadline; a renewal that succeeds ends that streak, so a later stall
// (no renewal, none failed yet) leaves the cluster at the new deadline,
// and one that fails while the node reaches a majority gets the grace
// again.
func TestElectionGraceEndsAtARenewal(t *testing.T) {
	c := &Cluster{member: term{testTTL}, lease: term{testTTL}}
	t0 := time.Now()
	in := func(at time.Time) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inClusterLocked(at)
	}
	c.renewed(t0)
	c.renewFailed(true)
	after := c.member.deadline(t0).Add(time.Millisecond)
	if !in(after) {
		t.Fatalf("out of the cluster just past the deadline while its renewals fail with a majority reached: want the election's grace")
	}
	t1 := t0.Add(c.member.ttl / 3)
	c.renewed(t1)
	if after := c.member.deadline(t1).Add(time.Millisecond); in(after) {
		t.Errorf("in the cluster past the deadline of a renewal that succeeded, with no renewal failed since: want out")
	}
	c.renewFailed(true)
	if after := c.member.deadline(t1).Add(time.Millisecond); !in(after) {
		t.Errorf("out of the cluster past the deadline, a renewal failed since with a majority reached: want the election's grace")
	}
}
