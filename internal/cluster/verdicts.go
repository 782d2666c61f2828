package cluster

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// watchVerdicts reads the cluster's state back, in the order the rule
// needs it: once this node has announced itself (so that it counts among
// the live members it decides with), the live members, then the recorded
// verdicts (each contact's status while its vantages disagree), then the
// votes; Ready closes after the votes' first pass. The three watches then
// follow their buckets until ctx ends.
func (c *Cluster) watchVerdicts(ctx context.Context, b *buckets, announced chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-announced:
	}
	var wg sync.WaitGroup
	members, records := make(chan struct{}), make(chan struct{})
	wg.Go(func() { c.watchMembers(ctx, b.members, members) })
	wg.Go(func() { c.watch(ctx, b.verdicts, c.recordEntry, once(records), false) })
	for _, ch := range []chan struct{}{members, records} {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-ch:
		}
	}
	c.awaitRecords(ctx, b.verdicts)
	c.l.seed()
	var first sync.Once // a rewatch's pass finds nothing a reload's Removed did not withdraw
	c.watch(ctx, b.votes, c.voteEntry, func(map[string]bool) {
		first.Do(func() {
			c.withdrawUnconfigured()
			close(c.ready)
		})
	}, false)
	wg.Wait()
}

// awaitRecords waits until the verdicts watch has delivered the last
// record the bucket's stream holds, as its leader says, or ctx ends. The
// watch's consumer may run on any replica of the stream (NATS places a
// one-replica consumer on any server of the stream's), this node's own
// among them: a server just restarted serves the records of its
// previous run until it has caught up, and its first pass ends with
// them. Seeding from them would keep a verdict the cluster has since
// changed until this node's own probes vote (recordsSeq is the highest
// revision the watch delivered).
func (c *Cluster) awaitRecords(ctx context.Context, kv jetstream.KeyValue) {
	for ctx.Err() == nil {
		if last, ok := lastSeq(ctx, c.nc, kv.Bucket(), c.member.ttl/6); ok && c.recordsSeq.Load() >= last {
			return
		}
		sleepUntil(ctx, time.Now().Add(c.member.retry()))
	}
}

// recordEntry keeps an entry of the verdicts bucket; until the seed ends
// (awaitRecords) it also seeds the tally, which decides on its own from
// then on (a record is the leader's decision of a vote this node may not
// have counted yet).
func (c *Cluster) recordEntry(e jetstream.KeyValueEntry) {
	if r := e.Revision(); r > c.recordsSeq.Load() { // only the verdicts watch writes it
		c.recordsSeq.Store(r)
	}
	contact, ok := parseContactKey(e.Key())
	if !ok {
		return
	}
	if removed(e) {
		c.forget(contact, true, e.Revision())
		return
	}
	if c.l.record(contact, statusOf(e), e.Revision()) {
		c.dropOrphans([]string{contact}) // a record written after its last vote went
	}
}

// voteEntry counts an entry of the votes bucket.
func (c *Cluster) voteEntry(e jetstream.KeyValueEntry) {
	contact, node, ok := parseVoteKey(e.Key())
	if !ok {
		return
	}
	m := markOf(e)
	s := m.status
	var o outcome
	c.decide(func() outcome {
		o = c.l.voteMark(contact, node, m, e.Revision(), time.Now())
		return o
	})
	c.strayed(o) // a foreign vote logged
	if !c.l.ours(node) {
		return
	}
	if s != qualify.Reachable && s != qualify.Unreachable {
		c.forget(contact, false, 0)
		c.dropOrphans([]string{contact})
	}
}

// statusOf is the status an entry holds: NonQualified for a removal or a
// value that is not a status label.
func statusOf(e jetstream.KeyValueEntry) qualify.Status {
	if removed(e) {
		return qualify.NonQualified
	}
	s, _ := qualify.ParseStatus(string(e.Value()))
	return s
}

// markOf is the vote an entry holds ("Unreachable RUN", "Reachable RUN
// draining"): its status (NonQualified for a removal or a value whose
// status is not a label), the voter's run ("" for a vote that names
// none) and whether it says the peer is draining.
func markOf(e jetstream.KeyValueEntry) mark {
	if removed(e) {
		return mark{status: qualify.NonQualified}
	}
	label, rest, _ := strings.Cut(string(e.Value()), " ")
	run, flag, _ := strings.Cut(rest, " ")
	s, _ := qualify.ParseStatus(label)
	return mark{status: s, run: run, drain: flag == drainFlag}
}

// drainFlag follows the run in a vote that says the peer is draining.
const drainFlag = "draining"

// publish writes this node's votes and, while it leads, the cluster's
// verdicts, until ctx ends: the latest status of each contact, retried
// until NATS takes it.
func (c *Cluster) publish(ctx context.Context, b *buckets) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		c.mu.Lock()
		until, leading := c.heldUntil, c.leadingAt(time.Now())
		c.mu.Unlock()
		out := c.l.take(leading) // only the leader records verdicts
		failed := batch{votes: c.write(ctx, b.js, bucketVotes, out.votes, func(contact string) string { return voteKey(contact, c.cfg.Self) }, c.voteRun(out.drains))}
		// Records are fenced as pushes are: none is sent past the
		// lease's safe deadline, when another node may lead and record.
		rctx, cancel := context.WithDeadline(ctx, until)
		failed.records = c.write(rctx, b.js, bucketVerdicts, out.records, contactKey, nil)
		failed.strays = c.purgeStrays(rctx, b, out.strays)
		cancel()
		c.l.requeue(failed)
		if len(failed.votes)+len(failed.records)+len(failed.strays) > 0 {
			sleepUntil(ctx, time.Now().Add(c.member.retry()))
			c.poke()
		}
	}
}

// voteRun is what follows the status in this node's vote of a contact:
// its run, and drainFlag for the contacts of drains.
func (c *Cluster) voteRun(drains map[string]bool) func(string) string {
	return func(contact string) string {
		if drains[contact] {
			return c.run + " " + drainFlag
		}
		return c.run
	}
}

// sent is one write in flight.
type sent struct {
	contact string
	status  qualify.Status
	ack     jetstream.PubAckFuture
}

// write puts each status under key(contact) of bucket, removing the key
// for a status that is no vote, and returns those NATS refused or did
// not acknowledge within the publisher's timeout. The writes are
// pipelined: up to publishWindow are sent without waiting for the ones
// before to be acknowledged, so a window costs about one round trip
// through the replicas instead of one per contact, and only a window's
// messages are held at a time. Each contact is written once per batch,
// and a window is acknowledged before the next one is sent, so the
// latest status of a contact is the one the bucket keeps.
//
// A vote carries run(contact), the voter's run and its drain (markOf); a
// record carries none (nil run). Nothing is sent once ctx has ended: what
// is left comes back as failed.
func (c *Cluster) write(ctx context.Context, js jetstream.JetStream, bucket string, out map[string]qualify.Status, key func(string) string, run func(string) string) map[string]qualify.Status {
	failed := map[string]qualify.Status{}
	window := make([]sent, 0, min(len(out), publishWindow))
	for contact, s := range out {
		if ctx.Err() != nil { // the lease's deadline, for records
			failed[contact] = s
			continue
		}
		var r string
		if run != nil {
			r = run(contact)
		}
		ack, err := js.PublishMsgAsync(kvMsg(bucket, key(contact), s, r), jetstream.WithStallWait(c.member.ttl/3))
		if err != nil {
			failed[contact] = s
			continue
		}
		if window = append(window, sent{contact, s, ack}); len(window) == publishWindow {
			awaitAcks(ctx, window, failed)
			window = window[:0]
		}
	}
	awaitAcks(ctx, window, failed)
	return failed
}

// awaitAcks waits for the acknowledgement of each write of window and
// adds those that failed (or were still in flight when ctx ended) to
// failed.
func awaitAcks(ctx context.Context, window []sent, failed map[string]qualify.Status) {
	for _, w := range window {
		select {
		case <-w.ack.Ok():
		case <-w.ack.Err():
			failed[w.contact] = w.status
		case <-ctx.Done():
			failed[w.contact] = w.status
		}
	}
}

// kvMsg is the message that puts status (and run, if any, after a
// space) under key in bucket, or removes the key for a status that is no
// vote, as KeyValue's Put and Delete publish them: to the bucket's
// subject for the key, a removal with the KV-Operation header.
func kvMsg(bucket, key string, s qualify.Status, run string) *nats.Msg {
	if s == qualify.Reachable || s == qualify.Unreachable {
		v := s.String()
		if run != "" {
			v += " " + run
		}
		return &nats.Msg{Subject: kvSubject(bucket, key), Data: []byte(v)}
	}
	return &nats.Msg{Subject: kvSubject(bucket, key), Header: nats.Header{kvOperation: {kvDelete}}}
}
