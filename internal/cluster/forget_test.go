package cluster

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// entry is a bucket entry for the tests, no server behind it.
type entry struct {
	key   string
	value string
	op    jetstream.KeyValueOp
	rev   uint64
}

func (e entry) Bucket() string                  { return "" }
func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return []byte(e.value) }
func (e entry) Revision() uint64                { return e.rev }
func (e entry) Created() time.Time              { return time.Time{} }
func (e entry) Delta() uint64                   { return 0 }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

// voted is node's vote on contact as an entry of the votes bucket; s
// NonQualified is its removal.
func voted(contact, node string, s qualify.Status) entry {
	if s == qualify.NonQualified {
		return entry{key: voteKey(contact, node), op: jetstream.KeyValueDelete}
	}
	return entry{key: voteKey(contact, node), value: s.String(), op: jetstream.KeyValuePut}
}

// bare is a Cluster of nodes a, b, c with no server: its state and
// rules only; leading sets whether it holds the lease.
func bare(leading bool, configured func(string) bool) *Cluster {
	cfg := Config{Self: "a", Quorum: Majority, Vantages: 3, Nodes: []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	c := &Cluster{cfg: cfg, hooks: Hooks{Configured: configured}, lease: term{time.Hour}, wake: make(chan struct{}, 1),
		l: newLedger(cfg.Self, "", cfg.Nodes, cfg.Quorum, cfg.Vantages), free: freeSpace}
	c.l.tally.members([]string{"a", "b", "c"})
	if leading {
		c.l.leading = true
		c.held, c.heldSent = true, time.Now()
		c.heldUntil = c.lease.deadline(c.heldSent)
	}
	return c
}

// TestOrphanedVerdictRule: the leader deletes a contact's verdict once no
// vote holds it and its own configuration does not have it; a vote
// still held (a node whose file still has it), the leader's own file
// having it, or not leading, keeps the verdict.
func TestOrphanedVerdictRule(t *testing.T) {
	const k = "t/sip:192.0.2.1"
	tests := []struct {
		name       string
		leading    bool
		configured bool
		keep       []string // nodes whose vote stays
		drop       bool
	}{
		{"leader, every vote withdrawn, not configured", true, false, nil, true},
		{"a node still votes", true, false, []string{"c"}, false},
		{"the leader's file still has it", true, true, nil, false},
		{"not leading", false, false, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := bare(tt.leading, func(string) bool { return tt.configured })
			c.l.recorded[k] = qualify.Reachable
			for _, n := range []string{"a", "b", "c"} {
				c.voteEntry(voted(k, n, qualify.Reachable))
			}
			for _, n := range []string{"a", "b", "c"} {
				if !slices.Contains(tt.keep, n) {
					c.voteEntry(voted(k, n, qualify.NonQualified))
				}
			}
			if dropped := c.l.recordsOut[k] == qualify.Removed; dropped != tt.drop {
				t.Fatalf("records to write %v, want the verdict's removal queued: %v", c.l.recordsOut, tt.drop)
			}
		})
	}
}

// TestVerdictRemovalForgetsStatus: the removal of a verdict no vote holds
// takes the contact's status from the node (the hook hears it go to
// NonQualified); a contact that still has a vote keeps its status until
// that vote goes too.
func TestVerdictRemovalForgetsStatus(t *testing.T) {
	var heard []Verdict
	c := bare(false, nil)
	c.hooks.Verdict = func(v Verdict) { heard = append(heard, v) }
	const gone, held = "t/sip:192.0.2.1", "t/sip:192.0.2.2"
	for _, k := range []string{gone, held} {
		c.recordEntry(entry{key: contactKey(k), value: "Unreachable", op: jetstream.KeyValuePut})
	}
	c.l.seeded = true
	c.voteEntry(voted(held, "b", qualify.Unreachable))
	heard = nil
	for _, k := range []string{gone, held} {
		c.recordEntry(entry{key: contactKey(k), op: jetstream.KeyValueDelete})
	}
	if _, ok := c.l.tally.status[gone]; ok || c.Status(held) != qualify.Unreachable {
		t.Fatalf("statuses %v, want %s forgotten and %s kept", c.l.tally.status, gone, held)
	}
	if _, ok := c.l.recorded[gone]; ok {
		t.Fatalf("recorded %v, want %s gone", c.l.recorded, gone)
	}
	if len(heard) != 1 || heard[0].Contact != gone || heard[0].Status != qualify.NonQualified || heard[0].From != qualify.Unreachable {
		t.Fatalf("the hook heard %+v, want %s from Unreachable to NonQualified", heard, gone)
	}
	// The record went before the last vote (two watches, either order):
	// the vote's removal forgets the status.
	heard = nil
	c.voteEntry(voted(held, "b", qualify.NonQualified))
	if _, ok := c.l.tally.status[held]; ok || len(heard) != 1 || heard[0].Contact != held {
		t.Fatalf("after the last vote of %s went: statuses %v, the hook heard %+v; want it forgotten", held, c.l.tally.status, heard)
	}
}

// removable is the set of contacts a test node's file no longer has.
type removable struct {
	mu   sync.Mutex
	gone map[string]bool
}

func (r *removable) remove(k string) { r.mu.Lock(); r.gone[k] = true; r.mu.Unlock() }

func (r *removable) has(k string) bool { r.mu.Lock(); defer r.mu.Unlock(); return !r.gone[k] }

// bucketHolds reports whether node n's view of bucket answered and
// holds key (want true) or does not (want false): a query that fails
// says neither, so that a wait asks again and a check fails.
func bucketHolds(t *testing.T, n *testNode, bucket, key string, want bool) bool {
	t.Helper()
	js, ctx, cancel := n.jetStream(t)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return false
	}
	_, err = kv.Get(ctx, key)
	switch {
	case err == nil:
		return want
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return !want
	}
	return false
}

// TestRemovedContactLeavesNothing: a contact removed from every node's
// file leaves no vote and no verdict in the buckets, and no status on any
// node, including the votes of a node that was down during the reload
// (it withdraws them when it starts with the new file).
func TestRemovedContactLeavesNothing(t *testing.T) {
	cfgs := testConfigs(t, 3, Majority)
	files := make([]*removable, 3)
	var nodes []*testNode
	for i, cfg := range cfgs {
		files[i] = &removable{gone: map[string]bool{}}
		nodes = append(nodes, startNodeWith(t, cfg, files[i].has))
	}
	for _, n := range nodes {
		waitFor(t, 10*testTTL, n.cfg.Self+" sees every member", func() bool { return upCount(n.c.View()) == 3 })
		<-n.c.Ready()
	}
	const k = "t/sip:192.0.2.7:5060"
	for _, n := range nodes {
		n.c.Report(k, qualify.Reachable)
	}
	waitFor(t, 10*testTTL, "the verdict is recorded", func() bool { return bucketHolds(t, nodes[0], bucketVerdicts, contactKey(k), true) })
	waitFor(t, 10*testTTL, "c's vote is in the bucket", func() bool { return bucketHolds(t, nodes[0], bucketVotes, voteKey(k, "c"), true) })

	nodes[2].stop() // down during the reload: its vote stays
	for i, n := range nodes[:2] {
		files[i].remove(k)
		n.c.Report(k, qualify.Removed)
	}
	for _, node := range []string{"a", "b"} {
		waitFor(t, 10*testTTL, node+"'s vote is withdrawn", func() bool { return bucketHolds(t, nodes[0], bucketVotes, voteKey(k, node), false) })
	}
	if !bucketHolds(t, nodes[0], bucketVotes, voteKey(k, "c"), true) {
		t.Fatal("c's vote went while c was down")
	}

	files[2].remove(k)
	nodes[2] = startNodeWith(t, cfgs[2], files[2].has)
	waitFor(t, 10*testTTL, "c withdraws its vote at start", func() bool { return bucketHolds(t, nodes[0], bucketVotes, voteKey(k, "c"), false) })
	waitFor(t, 10*testTTL, "the leader deletes the verdict", func() bool { return bucketHolds(t, nodes[0], bucketVerdicts, contactKey(k), false) })
	for _, n := range nodes {
		waitFor(t, 10*testTTL, n.cfg.Self+" forgets the status", func() bool {
			n.c.l.mu.Lock()
			defer n.c.l.mu.Unlock()
			_, decided := n.c.l.tally.status[k]
			_, recorded := n.c.l.recorded[k]
			return !decided && !recorded && len(n.c.l.tally.votes[k]) == 0
		})
	}
}
