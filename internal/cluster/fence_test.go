package cluster

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// slowJS acknowledges each write after delay, as NATS does while a
// stream elects its leader; it records the messages as sent and when.
type slowJS struct {
	jetstream.JetStream
	delay time.Duration
	sent  []*nats.Msg
	at    []time.Time
}

func (f *slowJS) PublishMsgAsync(m *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f.sent, f.at = append(f.sent, m), append(f.at, time.Now())
	a := &fakeAck{js: &fakeJS{}, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	time.AfterFunc(f.delay, func() { a.ok <- &jetstream.PubAck{} })
	return a, nil
}

// TestRecordsFencedByTheLease: the leader's batch holds a vote and a
// verdict to record; the vote's write takes longer than the lease has
// left. The record, written after the lease's safe deadline, could
// overwrite what the next leader recorded: it is not written, as a push
// is not sent, past the deadline.
func TestRecordsFencedByTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := bare(true, nil)
		c.member = term{3 * time.Second}
		c.heldUntil = time.Now().Add(time.Second)
		c.l.votesOut["v"] = qualify.Reachable
		c.l.recordsOut["r"] = qualify.Unreachable
		js := &slowJS{delay: 2 * time.Second}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go c.publish(ctx, &buckets{js: js})
		c.poke()
		time.Sleep(5 * time.Second) // virtual: the batch's writes are done
		synctest.Wait()
		for i, m := range js.sent {
			if strings.Contains(m.Subject, bucketVerdicts) && !js.at[i].Before(c.heldUntil) {
				t.Errorf("a record written %v after the lease's safe deadline: %s", js.at[i].Sub(c.heldUntil), m.Subject)
			}
		}
		cancel()
		synctest.Wait()
	})
}

// bucketTTL is bucket's TTL as n's connection reads it.
func bucketTTL(t *testing.T, n *testNode, bucket string) time.Duration {
	t.Helper()
	js, ctx, cancel := n.jetStream(t)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.TTL()
}

// TestMembersTTLIsTheLeaders: a node that starts with another member_ttl
// than the cluster's (a file changed on one node of three) does not set
// the members bucket's TTL: as the lease bucket's, only the leader sets
// it, to its file's; the node renews its membership as the bucket's TTL
// needs, so that its key never lapses between its renewals.
func TestMembersTTLIsTheLeaders(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	waitFor(t, 10*testTTL, "one leader", func() bool { return len(leaders(nodes)) == 1 })
	var other *testNode
	for _, n := range nodes {
		if !n.c.Leading() {
			other = n
		}
	}
	other.stop()
	cfg := other.cfg
	cfg.MemberTTL = 10 * testTTL
	again := startNode(t, cfg)
	select {
	case <-again.c.Ready():
	case <-time.After(10 * testTTL):
		t.Fatal("the restarted node is not ready")
	}
	if got := bucketTTL(t, nodes[0], bucketMembers); got != testTTL {
		t.Errorf("the members bucket's TTL is %v once %s started with member_ttl %v, want the leader's %v", got, cfg.Self, cfg.MemberTTL, testTTL)
	}
	waitFor(t, 10*testTTL, cfg.Self+" renews within the bucket's TTL", func() bool {
		return again.c.memberTerm().ttl == testTTL
	})
}
