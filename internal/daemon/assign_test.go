package daemon

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// assignLab is a 3-node lab with vantages=2 and, besides the lab's
// contact, the AoRs v0..v8 of one contact each on the same peer.
func assignLab(t *testing.T) *clusterLab {
	t.Helper()
	l := &clusterLab{peer: newDropper(t), quorum: "majority", vantages: "2"}
	l.extra = func(int) []pjsip.AoR {
		var out []pjsip.AoR
		for k := range 9 {
			name := fmt.Sprintf("v%d", k)
			out = append(out, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{"sip:" + name + "@" + l.peer.r.Addr().String()}, Policy: labPolicy()}})
		}
		return out
	}
	return startClusterLab(t, l, 3)
}

// probers returns, by contact key, the nodes of nodes whose engine
// probes it, and fails the test on a contact a node does not list.
func probers(t *testing.T, nodes ...*testNode) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, nd := range nodes {
		for _, c := range nd.d.eng.Contacts() {
			key := ContactKey(c.AoR, c.URI)
			if _, ok := out[key]; !ok {
				out[key] = []string{}
			}
			if !c.Elsewhere {
				out[key] = append(out[key], nd.name)
			}
		}
	}
	return out
}

// wantAssigned fails unless every contact is probed by the nodes Assign
// gives it among live, 2 of them, and by no other.
func wantAssigned(t *testing.T, got map[string][]string, live []string) {
	t.Helper()
	if len(got) != 10 {
		t.Fatalf("%d contacts listed, want 10: %v", len(got), got)
	}
	for key, nodes := range got {
		want := cluster.Assign(key, live, 2)
		slices.Sort(want)
		if !slices.Equal(nodes, want) {
			t.Errorf("%s is probed by %v, want %v", key, nodes, want)
		}
	}
}

// everyContactSays waits until each of nodes has the cluster say s of
// every contact.
func everyContactSays(t *testing.T, s qualify.Status, bound time.Duration, nodes ...*testNode) {
	t.Helper()
	waitUntil(t, bound, "the cluster says "+s.String()+" of every contact", func() bool {
		for _, nd := range nodes {
			for _, c := range nd.d.eng.Contacts() {
				if st, _, _ := nd.d.votes(c.AoR, c.URI); st != s {
					return false
				}
			}
		}
		return true
	})
}

// survivorVotes bounds how long the survivors of a stopped node take to
// count each other's votes of the contacts that moved.
const survivorVotes = 30 * time.Second

// TestClusterVantagesAssign: with vantages=2 of 3 nodes each contact is
// probed by exactly the 2 nodes rendezvous hashing gives it; the others
// list it NonQualified and not probed (no probe applied), with the
// cluster's status; each member announces the contacts it probes. A node
// stopped: its share moves to the survivors, which probe it at once, the
// cluster's status stays Reachable, the stopped node's votes are no
// longer counted, and the verdict still follows the survivors' probes.
func TestClusterVantagesAssign(t *testing.T) {
	l := assignLab(t)
	a, b, c := l.nodes[0], l.nodes[1], l.nodes[2]
	everyContactSays(t, qualify.Reachable, labBound, l.nodes...)
	assigned := probers(t, l.nodes...)
	wantAssigned(t, assigned, []string{"a", "b", "c"})
	counts := map[string]int{}
	applied := map[string]uint64{} // probes applied before (a node that saw only itself probed everything)
	for _, nd := range l.nodes {
		for _, ct := range nd.d.eng.Contacts() {
			key := ContactKey(ct.AoR, ct.URI)
			here := slices.Contains(assigned[key], nd.name)
			if here {
				counts[nd.name]++
			}
			if !here && (ct.Status != qualify.NonQualified || !ct.NextProbe.IsZero()) {
				t.Errorf("node %s, contact %s not probed here: status %v, next probe %v", nd.name, key, ct.Status, ct.NextProbe)
			}
			if !here {
				applied[nd.name+" "+key] = ct.Stats.Probes
			}
		}
	}
	for _, nd := range l.nodes {
		waitUntil(t, 2*clusterTTL*time.Second, nd.name+" sees each member's probes", func() bool {
			v, _ := nd.d.clusterView()
			for _, m := range v.Members {
				if m.Probes != counts[m.Name] {
					return false
				}
			}
			return true
		})
	}

	for _, nd := range l.nodes {
		waitUntil(t, labBound, nd.name+" counts each contact's two vantages' votes", func() bool {
			for key, want := range assigned {
				aor, uri, _ := splitContactKey(key)
				_, votes, _ := nd.d.votes(aor, uri)
				if len(votes) != 2 || countVotes(votes, "Reachable") != 2 || !slices.ContainsFunc(votes, func(v api.Vote) bool { return v.Node == want[0] }) {
					return false
				}
			}
			return true
		})
	}

	for _, nd := range l.nodes {
		waitUntil(t, 2*labBound, nd.name+" keeps probing its share (3 probes each)", func() bool {
			for _, ct := range nd.d.eng.Contacts() {
				if !ct.Elsewhere && ct.Stats.Probes < 3 {
					return false
				}
			}
			return true
		})
	}

	for _, nd := range l.nodes {
		for _, ct := range nd.d.eng.Contacts() {
			if n, ok := applied[nd.name+" "+ContactKey(ct.AoR, ct.URI)]; ok && ct.Stats.Probes != n {
				t.Errorf("node %s probed %s/%s, not its share: %d probes applied, %d before", nd.name, ct.AoR, ct.URI, ct.Stats.Probes, n)
			}
		}
	}

	c.stop()
	stopped := time.Now()
	survivors := []*testNode{a, b}
	waitUntil(t, 2*clusterTTL*time.Second, "the survivors probe c's share", func() bool {
		for _, nodes := range probers(t, survivors...) {
			if len(nodes) != 2 {
				return false
			}
		}
		return true
	})
	t.Logf("the survivors probe c's share %v after c stopped (member_ttl %d s, the README's bound twice it)", time.Since(stopped).Round(time.Millisecond), clusterTTL)
	everyContactSays(t, qualify.Reachable, 0, survivors...)
	for _, nd := range survivors {
		for _, ct := range nd.d.eng.Contacts() {
			_, votes, _ := nd.d.votes(ct.AoR, ct.URI)
			if slices.ContainsFunc(votes, func(v api.Vote) bool { return v.Node == "c" }) {
				t.Errorf("node %s still counts c's vote of %s/%s: %v", nd.name, ct.AoR, ct.URI, votes)
			}
		}
	}
	// The votes' way may wait for a stream leader elected in place of the
	// stopped node's server, and a survivor's votes watch that was served
	// by that server for its consumer's reset (seen up to 18 s after the
	// stop, on a loaded host).
	waitUntil(t, survivorVotes, "the survivors probe and vote every contact Reachable", func() bool {
		for _, nd := range survivors {
			for _, ct := range nd.d.eng.Contacts() {
				if _, votes, _ := nd.d.votes(ct.AoR, ct.URI); countVotes(votes, "Reachable") != 2 {
					return false
				}
			}
		}
		return true
	})
	l.peer.Set(true, a.sip, b.sip)
	everyContactSays(t, qualify.Unreachable, labBound, survivors...)
}
