package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// announcement is the value of a node's membership key.
type announcement struct {
	Since  time.Time `json:"since"`
	Probes int       `json:"probes"`
	Digest string    `json:"digest,omitempty"`
}

// announce renews this node's membership every MemberTTL/3 until ctx
// ends, then removes it, so that the others see it leave at once. It
// closes announced after the first renewal that succeeded.
func (c *Cluster) announce(ctx context.Context, kv jetstream.KeyValue, announced chan struct{}) {
	first := once(announced)
	for {
		sent := time.Now()
		next := c.member.renewAt(sent)
		if c.renew(ctx, kv) {
			c.mu.Lock()
			c.memberSent = sent
			c.mu.Unlock()
			first(nil)
		} else {
			next = sent.Add(c.member.retry())
		}
		if !sleepUntil(ctx, next) {
			break
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), c.member.ttl/3)
	defer cancel()
	_ = kv.Delete(dctx, c.cfg.Self)
}

// renew writes this node's membership key once.
func (c *Cluster) renew(ctx context.Context, kv jetstream.KeyValue) bool {
	c.mu.Lock()
	a := announcement{Since: c.start, Probes: c.probes, Digest: c.digest}
	c.mu.Unlock()
	b, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(ctx, c.member.ttl/3)
	defer cancel()
	_, err := kv.Put(ctx, c.cfg.Self, b)
	return err == nil
}

// memberEntry records one entry of the members bucket and returns the
// live nodes when they changed.
func (c *Cluster) memberEntry(e jetstream.KeyValueEntry) ([]string, bool) {
	name := e.Key()
	if checkName(name) != nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == c.cfg.Self {
		c.selfSeen = time.Now()
	}
	was := c.members[name].Up
	m := Member{Name: name}
	if removed(e) {
		m.Since = time.Now()
	} else {
		var a announcement
		if json.Unmarshal(e.Value(), &a) != nil {
			return nil, false
		}
		m.Up, m.Since, m.Probes, m.Digest = true, a.Since, a.Probes, a.Digest
	}
	c.members[name] = m
	if was == m.Up {
		return nil, false
	}
	return c.liveLocked(), true
}

// liveLocked lists the members up; c.mu held.
func (c *Cluster) liveLocked() []string {
	var live []string
	for name, m := range c.members {
		if m.Up {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	return live
}

// watchMembers follows the members bucket and re-decides the verdicts
// whenever the live nodes change; ready is closed after the first pass.
func (c *Cluster) watchMembers(ctx context.Context, kv jetstream.KeyValue, ready chan struct{}) {
	first := once(ready)
	c.watch(ctx, kv, func(e jetstream.KeyValueEntry) {
		if live, changed := c.memberEntry(e); changed {
			c.membersChanged(live)
		}
	}, func(seen map[string]bool) {
		if live, changed := c.pruneMembers(seen); changed {
			c.membersChanged(live)
		}
		first(seen)
	}, true)
}

// membersChanged decides the verdicts again for the live nodes, then
// tells the Members hook.
func (c *Cluster) membersChanged(live []string) {
	c.decide(func() []Verdict { return c.tally.members(live) })
	if c.hooks.Members != nil {
		c.hooks.Members(live)
	}
}

// membersStale reports whether the members watch has stopped delivering:
// this node's own renewal, sent every MemberTTL/3 and succeeded, has not
// come back through it for MemberTTL/2. An ordered consumer whose server
// died can take longer than the removal markers live to notice; new
// watches read the buckets afresh, so it counts a rewatch for them all.
func (c *Cluster) membersStale() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memberSent.IsZero() || c.selfSeen.IsZero() || c.memberSent.Sub(c.selfSeen) <= c.member.ttl/2 {
		return false
	}
	c.selfSeen = c.memberSent // the new watch has MemberTTL/2 to deliver it
	c.rewatches.Add(1)
	return true
}

// pruneMembers marks down every member up that a watch's first pass did
// not see, and returns the live nodes when they changed.
func (c *Cluster) pruneMembers(seen map[string]bool) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for name, m := range c.members {
		if m.Up && !seen[name] {
			c.members[name] = Member{Name: name, Since: time.Now()}
			changed = true
		}
	}
	return c.liveLocked(), changed
}

// watchLease follows the lease key: the leader's name, and a wake-up for
// the candidate when the key is removed.
func (c *Cluster) watchLease(ctx context.Context, kv jetstream.KeyValue) {
	c.watch(ctx, kv, func(e jetstream.KeyValueEntry) {
		if e.Key() != leaseKey {
			return
		}
		leader := string(e.Value())
		if removed(e) {
			leader = ""
			select {
			case c.vacant <- struct{}{}:
			default:
			}
		}
		c.seeLeader(leader, e.Revision())
	}, func(seen map[string]bool) {
		if !seen[leaseKey] {
			c.mu.Lock()
			c.leader = ""
			c.mu.Unlock()
		}
	}, false)
}

// seeLeader records the lease's holder as of revision rev of its key
// (the watch's entries and a candidate's reads, lease.seen), unless a
// later revision was seen already: "" for none.
func (c *Cluster) seeLeader(leader string, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev >= c.leaderRev {
		c.leader, c.leaderRev = leader, rev
	}
}
