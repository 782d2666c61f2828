package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// announcement is the value of a node's membership key.
type announcement struct {
	Since  time.Time `json:"since"`
	Probes int       `json:"probes"`
	Digest string    `json:"digest,omitempty"`
	// Run names this run of the node, new at each start: only its votes
	// cast in it count (tally.mark).
	Run string `json:"run,omitempty"`
}

// announce renews this node's membership every MemberTTL/3 until ctx
// ends, then removes it, so that the others see it leave at once. It
// closes announced after the first renewal that succeeded.
func (c *Cluster) announce(ctx context.Context, kv jetstream.KeyValue, announced chan struct{}) {
	first := once(announced)
	for {
		sent := time.Now()
		t := c.memberTerm()
		next := t.renewAt(sent)
		if !c.storeFit() { // a node that cannot store lets its membership lapse
			next = sent.Add(t.retry())
		} else if c.renew(ctx, kv) {
			c.renewed(sent)
			first(nil)
			c.readMemberLife(ctx, kv)
			next = c.memberTerm().renewAt(sent)
		} else {
			c.renewFailed(c.reachesMajority())
			next = sent.Add(t.retry())
		}
		if !sleepUntil(ctx, next) {
			break
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), c.member.ttl/3)
	defer cancel()
	_ = kv.Delete(dctx, c.cfg.Self)
}

// renewed records a renewal of this node's membership sent at sent that
// succeeded; it ends the streak of failed ones, and their election's
// grace with it.
func (c *Cluster) renewed(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.memberSent, c.electing = sent, false
}

// renewFailed records a renewal that failed, while this node reached a
// majority of the nodes or not (reach): the election's grace
// (inClusterLocked).
func (c *Cluster) renewFailed(reach bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.electing = reach
}

// ElectionBound is how long JetStream may take to elect a stream's
// leader after the old one went, whatever the TTLs. It comes from
// nats-server's Raft (server/raft.go): a follower campaigns when no
// heartbeat came for a random election timeout between
// minElectionTimeout and maxElectionTimeout (4 and 9 s), measured from
// the dead leader's last heartbeat (hbInterval, 1 s, before its death
// at most), and a candidate whose vote split (two survivors campaigning
// at once) campaigns again after a new random timeout of up to 9 s. The
// bound is two maximal election timeouts and a heartbeat interval: one
// split vote, then an election that the first campaign wins.
const ElectionBound = 2*maxElectionTimeout + raftHeartbeat

// FailoverGap is the longest the routers may go without a leader that
// beats when the leader dies or is cut off, with a lease of lease: its
// term (the lease key expires lease after its last renewal), then the
// election of the lease's stream when the dead node's server led it,
// max(ElectionBound, lease), a campaign included. The daemon's
// failover check refuses a failopen_after no longer than it plus
// heartbeat_interval.
func FailoverGap(lease time.Duration) time.Duration { return lease + max(ElectionBound, lease) }

// maxElectionTimeout and raftHeartbeat are nats-server's Raft
// maxElectionTimeoutDefault and hbIntervalDefault (server/raft.go).
const (
	maxElectionTimeout = 9 * time.Second
	raftHeartbeat      = time.Second
)

// inClusterLocked reports whether this node is in the cluster at now:
// its membership was renewed within its term's deadline or, while its
// renewals fail, the node still reaches a majority of the nodes
// (electing) and the deadline passed less than an election ago (the
// longer of ElectionBound and lease_ttl). A renewal waits while
// JetStream elects the leader of the members bucket's stream (the
// server that led it died or was cut off, or a partition healed); that
// is not a lost cluster, and a node that lost the cluster no longer
// reaches a majority. c.mu held.
func (c *Cluster) inClusterLocked(now time.Time) bool {
	if c.memberSent.IsZero() || c.storeErr != "" {
		return false
	}
	d := c.memberTermLocked().deadline(c.memberSent)
	return now.Before(d) || (c.electing && now.Before(d.Add(max(ElectionBound, c.lease.ttl))))
}

// reachesMajority reports whether this node reaches a majority of the
// nodes of nodes=, itself included: its embedded server's routes, or,
// with an external NATS, its connection (the NATS cluster's own routes
// are not this node's to see).
func (c *Cluster) reachesMajority() bool {
	srv := c.server()
	if srv == nil {
		return c.nc != nil && c.nc.IsConnected()
	}
	rz, err := srv.Routez(nil)
	if err != nil {
		return false
	}
	peers := map[string]bool{c.cfg.Self: true}
	for _, r := range rz.Routes {
		if c.l.ours(r.RemoteName) {
			peers[r.RemoteName] = true
		}
	}
	return 2*len(peers) > len(c.cfg.Nodes)
}

// memberTerm is the term of this node's membership: its key lives the
// members bucket's TTL, which the leader sets to its file's member_ttl
// (followMembersTTL), so the node renews by the shorter of its own
// file's and the bucket's.
func (c *Cluster) memberTerm() term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.memberTermLocked()
}

// memberTermLocked is memberTerm; c.mu held.
func (c *Cluster) memberTermLocked() term {
	if c.memberLife > 0 && c.memberLife < c.member.ttl {
		return term{c.memberLife}
	}
	return c.member
}

// readMemberLife reads the members bucket's TTL after a renewal, within
// a sixth of the term; a read that fails keeps the last one.
func (c *Cluster) readMemberLife(ctx context.Context, kv jetstream.KeyValue) {
	ctx, cancel := context.WithTimeout(ctx, c.memberTerm().ttl/6)
	defer cancel()
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() <= 0 {
		return
	}
	c.mu.Lock()
	c.memberLife = st.TTL()
	c.mu.Unlock()
}

// followMembersTTL sets, once in each term this node leads (retried at
// each renewal until it is done), the members bucket's TTL to the
// file's member_ttl when it differs, and logs it: as for the lease
// bucket, only the leader sets it, on taking the lease, so that nodes
// whose files differ (a rolling change of member_ttl) do not set it in
// turn at each start. A node whose file says more renews by the
// bucket's (memberTerm) once it has read it after a renewal.
func (c *Cluster) followMembersTTL(ctx context.Context, b *buckets) {
	c.mu.Lock()
	n, due := c.terms, c.ttlTerm != c.terms && c.leadingAt(time.Now())
	c.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.lease.ttl/3)
	defer cancel()
	st, err := b.members.Status(ctx)
	if err != nil {
		return
	}
	if st.TTL() != c.cfg.MemberTTL {
		if _, err := b.js.UpdateKeyValue(ctx, ttlBucket(bucketMembers, c.cfg.Replicas(), c.cfg.MemberTTL)); err != nil {
			c.notice(slog.LevelError, fmt.Sprintf("cluster: bucket %s: TTL %v, the file's member_ttl %v: not updated (%v)", bucketMembers, st.TTL(), c.cfg.MemberTTL, err))
			return
		}
		c.notice(slog.LevelInfo, fmt.Sprintf("cluster: bucket %s: TTL updated from %v to the file's member_ttl %v", bucketMembers, st.TTL(), c.cfg.MemberTTL))
	}
	c.mu.Lock()
	c.ttlTerm = max(c.ttlTerm, n)
	c.mu.Unlock()
}

// renew writes this node's membership key once.
func (c *Cluster) renew(ctx context.Context, kv jetstream.KeyValue) bool {
	c.mu.Lock()
	a := announcement{Since: c.start, Probes: c.probes, Digest: c.digest, Run: c.run}
	c.mu.Unlock()
	b, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(ctx, c.memberTerm().ttl/3)
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
	now := time.Now()
	if name == c.cfg.Self {
		c.mu.Lock()
		c.selfSeen = now
		c.mu.Unlock()
	}
	var a announcement
	if !removed(e) && json.Unmarshal(e.Value(), &a) != nil {
		return nil, false
	}
	live, changed, o := c.l.member(name, a, removed(e), e.Revision(), now)
	c.strayed(o)
	return live, changed
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
	c.decide(func() outcome { return c.l.decideMembers(live) })
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
	return c.l.prune(seen, time.Now())
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
// A foreign holder is recorded and followed as none: a candidate
// removes its key (lease.look).
func (c *Cluster) seeLeader(leader string, rev uint64) {
	if leader != "" && !c.l.ours(leader) {
		c.strayed(c.l.sawForeign(leader)) // logged; the candidates remove the key
		leader = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev >= c.leaderRev {
		c.leader, c.leaderRev = leader, rev
	}
}
