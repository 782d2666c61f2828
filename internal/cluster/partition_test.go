package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// partitionable starts three nodes whose every route goes through a
// proxy of its own (from -> to), and returns them and the proxies.
func partitionable(t *testing.T) ([]*testNode, map[[2]string]*peertest.Proxy) {
	t.Helper()
	base := testConfigs(t, 3, Majority)
	proxies := map[[2]string]*peertest.Proxy{}
	var nodes []*testNode
	for _, cfg := range base {
		var own []Node
		for _, n := range base[0].Nodes {
			if n.Name == cfg.Self {
				own = append(own, n)
				continue
			}
			p := peertest.NewProxy(t, n.Route)
			proxies[[2]string{cfg.Self, n.Name}] = p
			own = append(own, Node{Name: n.Name, Route: p.Addr()})
		}
		cfg.Nodes, cfg.advertise = own, "127.0.0.1:1" // no route but through the proxies
		nodes = append(nodes, startNode(t, cfg))
	}
	for _, nd := range nodes {
		waitFor(t, 30*time.Second, nd.cfg.Self+" sees 3 members up", func() bool { return upCount(nd.c.View()) == 3 })
	}
	return nodes, proxies
}

// TestPartitionOfTheLeader: the leader's routes cut both ways (every
// proxy to and from it): the two nodes that still reach each other stay
// in the cluster at every sample (every 10 ms), and one of them leads
// within lease_ttl and a third of the cut, which both name within
// lease_ttl more and then for two TTLs; the cut node stops leading. The leader led none of the buckets'
// streams (it hands them on), so no stream election comes first.
func TestPartitionOfTheLeader(t *testing.T) {
	nodes, proxies := partitionable(t)
	old := oneLeader(t, nodes)
	rest := others(nodes, old)
	waitFor(t, 10*testTTL, "the leader hands every stream on", func() bool {
		for _, b := range []string{bucketLease, bucketMembers, bucketVotes, bucketVerdicts} {
			if streamLeader(t, rest[0], "KV_"+b) == old.cfg.Self || streamLeader(t, rest[0], "KV_"+b) == "" {
				return false
			}
		}
		return true
	})
	cut := time.Now()
	for pair, p := range proxies {
		if pair[0] == old.cfg.Self || pair[1] == old.cfg.Self {
			p.SetCut(true)
		}
	}
	var next *testNode
	took := waitFor(t, 10*testTTL, "one of the two others leads", func() bool {
		for _, n := range rest {
			if !n.c.View().InCluster {
				t.Fatalf("%s dropped out of the cluster %v after %s was cut off", n.cfg.Self, time.Since(cut), old.cfg.Self)
			}
			if n.c.Leading() {
				next = n
			}
		}
		return next != nil
	})
	t.Logf("%s cut off; %s leads %v later (lease_ttl %v)", old.cfg.Self, next.cfg.Self, took, testTTL)
	if bound := testTTL + testTTL/3 + 2*time.Second; took > bound {
		t.Errorf("%s led %v after the cut, want within lease_ttl and a third (%v, with 2 s of headroom)", next.cfg.Self, took, bound)
	}
	waitFor(t, 2*testTTL, old.cfg.Self+" stops leading", func() bool { return !old.c.Leading() })
	named := waitFor(t, 4*testTTL, "both name the new leader", func() bool {
		for _, n := range rest {
			if n.c.View().Leader != next.cfg.Self {
				return false
			}
		}
		return true
	})
	t.Logf("both name %s %v after the cut node stopped leading", next.cfg.Self, named)
	// The watch of the key tells the other at once, unless its consumer
	// was on the cut node; then the other's next campaign attempt reads
	// the key: its wait, its create and its read, a third of the TTL each.
	if bound := testTTL + 2*time.Second; named > bound {
		t.Errorf("both named %s %v after, want within lease_ttl (%v, with 2 s of headroom)", next.cfg.Self, named, bound)
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for hold := time.Now().Add(2 * testTTL); time.Now().Before(hold); <-tick.C {
		for _, n := range rest {
			if v := n.c.View(); !v.InCluster || v.Leader != next.cfg.Self {
				t.Fatalf("%s after the new leader: in cluster %v, leader %q, want %s", n.cfg.Self, v.InCluster, v.Leader, next.cfg.Self)
			}
		}
	}
}

// TestHealedNodeRejoins: the leader's routes are cut both ways until
// the two others count it out and it knows itself out of the cluster,
// then mended; the test prints when the cut node is back: in the
// cluster by its own view, up in every node's, its vote cast while cut
// come back to it and counted by the others. NATS's Raft has no
// pre-vote: the cut node campaigned while cut, and at the heal its
// higher term makes the leaders of the streams it replicates step down,
// so each such stream elects again (4 to 9 s) before the node's writes
// land. It is back within that election's bound and a renewal's term.
func TestHealedNodeRejoins(t *testing.T) {
	nodes, proxies := partitionable(t)
	cut := oneLeader(t, nodes)
	rest := others(nodes, cut)
	cutNode(proxies, cut.cfg.Self, true)
	waitFor(t, 10*testTTL, "the others count "+cut.cfg.Self+" out and it knows it", func() bool {
		return !cut.c.View().InCluster && upCount(rest[0].c.View()) == 2 && upCount(rest[1].c.View()) == 2
	})
	const contact = "t/sip:192.0.2.60:5060"
	cut.c.Report(contact, qualify.Unreachable)
	healed := time.Now()
	cutNode(proxies, cut.cfg.Self, false)
	conds := []struct {
		what string
		cond func() bool
	}{
		{cut.cfg.Self + " in the cluster", func() bool { return cut.c.View().InCluster }},
		{"every node sees 3 up", func() bool {
			for _, n := range nodes {
				if upCount(n.c.View()) != 3 {
					return false
				}
			}
			return true
		}},
		{"its vote came back to it", func() bool { n, _ := cut.c.l.stalled(time.Now()); return n == 0 }},
		{"the others count its vote", func() bool {
			for _, n := range rest {
				if n.vote(contact, cut.cfg.Self) != qualify.Unreachable {
					return false
				}
			}
			return true
		}},
	}
	took := make([]time.Duration, len(conds))
	waitFor(t, 20*testTTL, cut.cfg.Self+" back", func() bool {
		all := true
		for i, c := range conds {
			if took[i] == 0 && c.cond() {
				took[i] = time.Since(healed)
				t.Logf("%s %v after the heal", c.what, took[i])
			}
			all = all && took[i] > 0
		}
		return all
	})
	if worst, bound := slices.Max(took), ElectionBound+testTTL; worst > bound {
		t.Errorf("%s back %v after the heal, want within a JetStream election and member_ttl (%v)", cut.cfg.Self, worst, bound)
	}
}
