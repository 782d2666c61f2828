package cluster

import (
	"context"
	"sync"
	"time"

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
	wg.Go(func() {
		first := once(records)
		c.watch(ctx, b.verdicts, c.recordEntry, func(seen map[string]bool) {
			c.mu.Lock()
			c.seeded = true
			c.mu.Unlock()
			first(seen)
		}, false)
	})
	for _, ch := range []chan struct{}{members, records} {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-ch:
		}
	}
	ready := once(c.ready)
	c.watch(ctx, b.votes, c.voteEntry, func(seen map[string]bool) {
		c.withdrawUnconfigured()
		ready(seen)
	}, false)
	wg.Wait()
}

// recordEntry keeps an entry of the verdicts bucket; until the first pass
// over the bucket ends it also seeds the tally, which decides on its own
// from then on (a record is the leader's decision of a vote this node may
// not have counted yet).
func (c *Cluster) recordEntry(e jetstream.KeyValueEntry) {
	contact, ok := parseContactKey(e.Key())
	if !ok {
		return
	}
	if removed(e) {
		c.forget(contact, true)
		return
	}
	s := statusOf(e)
	c.mu.Lock()
	c.recorded[contact] = s
	if !c.seeded {
		c.tally.seed(contact, s)
	}
	orphan := c.seeded && len(c.tally.votes[contact]) == 0
	c.mu.Unlock()
	if orphan {
		c.dropOrphans([]string{contact}) // a record written after its last vote went
	}
}

// voteEntry counts an entry of the votes bucket.
func (c *Cluster) voteEntry(e jetstream.KeyValueEntry) {
	contact, node, ok := parseVoteKey(e.Key())
	if !ok {
		return
	}
	s := statusOf(e)
	c.decide(func() []Verdict {
		if v, changed := c.tally.vote(contact, node, s); changed {
			return []Verdict{v}
		}
		return nil
	})
	if s != qualify.Reachable && s != qualify.Unreachable {
		c.forget(contact, false)
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
		votes, records := c.votesOut, c.recordsOut
		c.votesOut, c.recordsOut = map[string]qualify.Status{}, map[string]qualify.Status{}
		if !c.leadingAt(time.Now()) {
			records = nil // only the leader records verdicts
		}
		c.sending = len(votes) + len(records)
		c.mu.Unlock()
		failed := c.write(ctx, b.votes, votes, func(contact string) string { return voteKey(contact, c.cfg.Self) })
		failedRecords := c.write(ctx, b.verdicts, records, contactKey)
		c.sent()
		if len(failed)+len(failedRecords) > 0 {
			c.requeue(failed, failedRecords)
			sleepUntil(ctx, time.Now().Add(c.member.retry()))
			c.poke()
		}
	}
}

// write puts each status under key(contact), removing the key for a
// status that is no vote, and returns those NATS refused.
func (c *Cluster) write(ctx context.Context, kv jetstream.KeyValue, out map[string]qualify.Status, key func(string) string) map[string]qualify.Status {
	failed := map[string]qualify.Status{}
	for contact, s := range out {
		wctx, cancel := context.WithTimeout(ctx, c.member.ttl/3)
		var err error
		if s == qualify.Reachable || s == qualify.Unreachable {
			_, err = kv.Put(wctx, key(contact), []byte(s.String()))
		} else {
			err = kv.Delete(wctx, key(contact))
		}
		cancel()
		if err != nil {
			failed[contact] = s
		}
	}
	return failed
}

// requeue puts refused writes back, unless a newer status came meanwhile.
func (c *Cluster) requeue(votes, records map[string]qualify.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for contact, s := range votes {
		if _, newer := c.votesOut[contact]; !newer {
			c.votesOut[contact] = s
		}
	}
	for contact, s := range records {
		if _, newer := c.recordsOut[contact]; !newer {
			c.recordsOut[contact] = s
		}
	}
}
