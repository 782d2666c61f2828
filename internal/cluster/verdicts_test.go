package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// fakeJS is the part of JetStream that write uses: PublishMsgAsync, with
// an answer per subject (refused at once, acknowledged, or an error on
// the future), and the messages as sent.
type fakeJS struct {
	jetstream.JetStream
	refuse, nack map[string]bool
	sent         []*nats.Msg
	// inflight counts the futures not yet read by write; peak is its
	// highest value.
	inflight, peak int
}

// fakeAck is a future already answered.
type fakeAck struct {
	js  *fakeJS
	ok  chan *jetstream.PubAck
	err chan error
}

func (a *fakeAck) Ok() <-chan *jetstream.PubAck { a.js.inflight--; return a.ok }
func (a *fakeAck) Err() <-chan error            { return a.err }
func (a *fakeAck) Msg() *nats.Msg               { return nil }

func (f *fakeJS) PublishMsgAsync(m *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if f.refuse[m.Subject] {
		return nil, errors.New("refused")
	}
	f.sent = append(f.sent, m)
	a := &fakeAck{js: f, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	if f.nack[m.Subject] {
		a.err <- errors.New("no ack")
	} else {
		a.ok <- &jetstream.PubAck{}
	}
	f.inflight++
	f.peak = max(f.peak, f.inflight)
	return a, nil
}

// TestWriteMessagesAndFailures: a vote is the status at the bucket's
// subject of its key, a withdrawal a KV delete with no data; a write
// refused at once and one whose acknowledgement fails both come back to
// be retried, and no other; and no more than publishWindow writes are in
// flight at once, however many the batch holds.
func TestWriteMessagesAndFailures(t *testing.T) {
	c := &Cluster{member: term{testTTL}}
	out := map[string]qualify.Status{"up": qualify.Reachable, "down": qualify.Unreachable, "gone": qualify.Removed, "none": qualify.NonQualified}
	for i := range 2*publishWindow + 5 {
		out[fmt.Sprint("bulk", i)] = qualify.Reachable
	}
	key := func(contact string) string { return voteKey(contact, "a") }
	subject := func(contact string) string { return kvSubject(bucketVotes, key(contact)) }
	js := &fakeJS{refuse: map[string]bool{subject("bulk1"): true}, nack: map[string]bool{subject("down"): true}}
	failed := c.write(context.Background(), js, bucketVotes, out, key, func(string) string { return "r1" })
	if len(failed) != 2 || failed["bulk1"] != qualify.Reachable || failed["down"] != qualify.Unreachable {
		t.Fatalf("failed %v, want bulk1=Reachable and down=Unreachable", failed)
	}
	if js.peak > publishWindow {
		t.Errorf("%d writes in flight at once, want at most %d", js.peak, publishWindow)
	}
	if len(js.sent) != len(out)-1 {
		t.Fatalf("%d messages sent, want %d", len(js.sent), len(out)-1)
	}
	bySubject := map[string]*nats.Msg{}
	for _, m := range js.sent {
		bySubject[m.Subject] = m
	}
	if m := bySubject["$KV.qualifyd_votes."+voteKey("up", "a")]; m == nil || string(m.Data) != "Reachable r1" || m.Header.Get(kvOperation) != "" {
		t.Errorf("the vote of up: %+v", m)
	}
	for _, contact := range []string{"gone", "none"} {
		if m := bySubject[subject(contact)]; m == nil || len(m.Data) != 0 || m.Header.Get("KV-Operation") != "DEL" {
			t.Errorf("the withdrawal of %s: %+v, want a KV-Operation: DEL without data", contact, m)
		}
	}
}

// TestPublishLatestStatusWins: a node that reports many contacts, more
// than a window of writes, and changes some of them while they are on
// their way, leaves each contact's last status in the bucket: the other
// nodes count exactly that.
func TestPublishLatestStatusWins(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	for _, nd := range nodes {
		go drainVerdicts(nd) // more verdicts than the hook's buffer, when nodes stop at the end
	}
	const n = publishWindow + 500
	contact := func(i int) string { return fmt.Sprintf("w%d/sip:10.2.%d.%d:5060", i, i/256, i%256) }
	want := func(i int) qualify.Status {
		if i%3 == 0 {
			return qualify.Unreachable
		}
		return qualify.Reachable
	}
	for i := range n {
		nodes[0].c.Report(contact(i), qualify.Unreachable)
	}
	for i := range n {
		if want(i) == qualify.Reachable {
			nodes[0].c.Report(contact(i), qualify.Reachable)
		}
	}
	// The bounds only stop a broken run: they are wide for a loaded
	// machine where every package runs under the race detector (a read
	// of the bucket has been seen to take more than 5 s then).
	took := waitFor(t, 20*testTTL, "b counts a's last vote of every contact", func() bool {
		for i := range n {
			if nodes[1].vote(contact(i), "a") != want(i) {
				return false
			}
		}
		return true
	})
	t.Logf("b counted a's last vote of %d contacts %v after the reports", n, took)
	js, err := jetstream.New(nodes[2].c.nc)
	if err != nil {
		t.Fatal(err)
	}
	read := func(key string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*testTTL)
		defer cancel()
		kv, err := js.KeyValue(ctx, bucketVotes)
		if err != nil {
			return "", err
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			return "", err
		}
		return string(e.Value()), nil
	}
	for _, i := range []int{0, 1, n - 1} {
		var got string
		var err error
		took := waitFor(t, 20*testTTL, "the bucket answers for a's vote on "+contact(i), func() bool {
			got, err = read(voteKey(contact(i), "a"))
			return err == nil || errors.Is(err, jetstream.ErrKeyNotFound) // a missing key is an answer
		})
		t.Logf("the bucket gave a's vote on %s in %v", contact(i), took) // the status, and the run it was cast in
		if err != nil || got != want(i).String()+" "+nodes[0].c.run {
			t.Fatalf("the bucket's vote of a on %s: %q %v, want %v", contact(i), got, err, want(i))
		}
	}
}

// drainVerdicts reads n's verdicts until its Run has ended.
func drainVerdicts(n *testNode) {
	for {
		select {
		case <-n.verdicts:
		case <-n.done:
			return
		}
	}
}
