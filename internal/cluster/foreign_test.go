package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// foreignContact is a contact that x, a node not in nodes=, would be a
// vantage of among a, b, c and x.
func foreignContact(t *testing.T) string {
	t.Helper()
	for i := range 100 {
		k := "trunk/sip:192.0.2." + string(rune('0'+i%10)) + string(rune('0'+i/10)) + ":5060"
		if slices.Contains(Assign(k, []string{"a", "b", "c", "x"}, 3), "x") {
			return k
		}
	}
	t.Fatal("no contact x is a vantage of")
	return ""
}

// TestForeignNodesNeverCount: on a shared NATS, x, a node not in
// nodes=, announces itself (and renews it) and votes Unreachable on a
// contact it would be a vantage of, and d, a node removed from nodes=, left a vote behind.
// With quorum=any either vote counted would take the contact down. No
// node counts x as a member or either vote; each lists x and d as
// foreign; the leader removes their keys.
func TestForeignNodesNeverCount(t *testing.T) {
	nodes := startCluster(t, 3, Any)
	contact := foreignContact(t)
	for _, n := range nodes {
		n.c.Report(contact, qualify.Reachable)
	}
	for _, n := range nodes {
		waitFor(t, 10*testTTL, n.cfg.Self+" says Reachable", func() bool { return n.c.Status(contact) == qualify.Reachable })
	}
	js, ctx, cancel := nodes[0].jetStream(t)
	defer cancel()
	members, err := js.KeyValue(ctx, bucketMembers)
	if err != nil {
		t.Fatal(err)
	}
	votes, err := js.KeyValue(ctx, bucketVotes)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	seen, err := members.Watch(wctx, "x", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(announcement{Since: time.Now(), Probes: 1})
	if _, err := members.Put(ctx, "x", b); err != nil {
		t.Fatal(err)
	}
	// x renews its membership as a node does, every TTL/3.
	rctx, stopRenewing := context.WithCancel(context.Background())
	defer stopRenewing()
	go func() {
		for sleepUntil(rctx, time.Now().Add(testTTL/3)) {
			_, _ = members.Put(rctx, "x", b)
		}
	}()
	for _, node := range []string{"x", "d"} {
		if _, err := votes.Put(ctx, voteKey(contact, node), []byte("Unreachable")); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(kv jetstream.KeyValue, key string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), testTTL)
		defer cancel()
		_, err := kv.Get(ctx, key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}
	removedX := false
	purged := func() bool {
	drain:
		for !removedX {
			select {
			case e, ok := <-seen.Updates():
				if !ok {
					t.Fatal("the watch of x's membership ended")
				}
				removedX = e != nil && removed(e)
			default:
				break drain
			}
		}
		return removedX && gone(votes, voteKey(contact, "x")) && gone(votes, voteKey(contact, "d"))
	}
	waitFor(t, 5*testTTL, "the leader removes x's and d's keys", purged)
	for _, n := range nodes {
		if s := n.c.Status(contact); s != qualify.Reachable {
			t.Errorf("%s says %v: a foreign vote counted", n.cfg.Self, s)
		}
		n.c.l.mu.Lock()
		live := slices.Clone(n.c.l.tally.live)
		n.c.l.mu.Unlock()
		if slices.Contains(live, "x") {
			t.Errorf("%s counts x among the live nodes %v", n.cfg.Self, live)
		}
		if f := n.c.View().Foreign; !slices.Equal(f, []string{"d", "x"}) {
			t.Errorf("%s lists %v as foreign, want d and x", n.cfg.Self, f)
		}
	}
}
