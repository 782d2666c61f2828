package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// clusterTTL is the member and lease TTL of the daemon's cluster tests,
// the cluster package's own test figure.
const clusterTTL = 3

// dropper is a SIP peer that drops the OPTIONS of chosen source ports:
// each node's probe socket is its source port.
type dropper struct {
	r *responder.Responder
	responder.Ports
}

// newDropper starts the peer on loopback.
func newDropper(t *testing.T) *dropper {
	t.Helper()
	p := &dropper{}
	r, err := responder.Listen("127.0.0.1:0", p.Decide)
	if err != nil {
		t.Fatal(err)
	}
	p.r = r
	t.Cleanup(func() { r.Close() })
	return p
}

// testNode is one daemon of a test cluster.
type testNode struct {
	name string
	sip  uint16
	d    *Daemon
	log  *peertest.Output
	stop func()
}

// clusterLab is n daemons in one process, clustered over loopback, each
// probing the contact t on one dropper.
type clusterLab struct {
	peer   *dropper
	nodes  []*testNode
	routes []string
	stores []string
	quorum string
	// vantages, if set, is the section's vantages=.
	vantages string
	// extra, if set, adds AoRs to node i's configuration (a file not yet
	// reloaded everywhere); sinks, if set, adds sinks. Each load of node
	// i's file calls them again, so that a test changes the file by
	// changing what they return (under mu) and reloading.
	extra func(i int) []pjsip.AoR
	sinks func(i int) []*pjsip.Sink
	mu    sync.Mutex
}

const labAoR = "t"

// labContact is the lab's one contact.
func (l *clusterLab) labContact() string { return "sip:t@" + l.peer.r.Addr().String() }

// newClusterLab starts n nodes named a, b, c... and waits until each is
// in the cluster with every node up, and one leads.
func newClusterLab(t *testing.T, n int, quorum string) *clusterLab {
	t.Helper()
	return startClusterLab(t, &clusterLab{peer: newDropper(t), quorum: quorum}, n)
}

// startClusterLab starts l's n nodes and waits as newClusterLab does.
func startClusterLab(t *testing.T, l *clusterLab, n int) *clusterLab {
	t.Helper()
	for range n {
		l.routes = append(l.routes, fmt.Sprintf("127.0.0.1:%d", peertest.FreePort(t, "tcp")))
		l.stores = append(l.stores, t.TempDir())
	}
	for i := range n {
		l.nodes = append(l.nodes, l.start(t, i))
	}
	for _, nd := range l.nodes {
		waitUntil(t, 30*time.Second, nd.name+" sees every node up", func() bool {
			v, _ := nd.d.clusterView()
			up := 0
			for _, m := range v.Members {
				if m.Up {
					up++
				}
			}
			return v.InCluster && up == n
		})
	}
	l.leader(t)
	return l
}

// start starts node i (again, after stop) with its own store.
func (l *clusterLab) start(t *testing.T, i int) *testNode {
	t.Helper()
	name := string(rune('a' + i))
	sip := uint16(peertest.FreePort(t, "udp"))
	var nodes []string
	for j, r := range l.routes {
		nodes = append(nodes, fmt.Sprintf("%c@%s", 'a'+j, r))
	}
	load := func() (*pjsip.Config, error) {
		conf := &pjsip.Config{
			AoRs: []pjsip.AoR{labAoRs(l.labContact())},
			Cluster: &pjsip.Cluster{Name: "c", File: "q.conf", Line: 1, Options: []pjsip.ClusterOption{
				{Key: "nodes", Value: strings.Join(nodes, ",")}, {Key: "store", Value: l.stores[i]}, {Key: "quorum", Value: l.quorum},
				{Key: "member_ttl", Value: fmt.Sprint(clusterTTL)}, {Key: "lease_ttl", Value: fmt.Sprint(clusterTTL)}}},
		}
		if l.vantages != "" {
			conf.Cluster.Options = append(conf.Cluster.Options, pjsip.ClusterOption{Key: "vantages", Value: l.vantages})
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.extra != nil {
			conf.AoRs = append(conf.AoRs, l.extra(i)...)
		}
		if l.sinks != nil {
			conf.Sinks = l.sinks(i)
		}
		return conf, nil
	}
	out := &peertest.Output{}
	d, err := New(Config{Load: load, Node: name,
		SIPBind: fmt.Sprintf("127.0.0.1:%d", sip), HTTPAddr: "127.0.0.1:0", Log: out})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	var once sync.Once
	nd := &testNode{name: name, sip: sip, d: d, log: out, stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(nd.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node %s logged:\n%s", name, out.String())
		}
	})
	return nd
}

// labPolicy is the lab's qualify policy: F 1 s, T 0.3 s, N 2, R 0.2 s.
func labPolicy() *qualify.Policy {
	return &qualify.Policy{Frequency: time.Second, Timeout: 300 * time.Millisecond, Failures: 2, RetryInterval: 200 * time.Millisecond}
}

// labAoRs is an AoR of the lab's policy with one contact, named after
// the contact's user part ("sip:u@..." is AoR u).
func labAoRs(contact string) pjsip.AoR {
	name, _, _ := strings.Cut(strings.TrimPrefix(contact, "sip:"), "@")
	return pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{contact}, Policy: labPolicy()}}
}

// leader waits until exactly one node leads and returns it.
func (l *clusterLab) leader(t *testing.T) *testNode {
	t.Helper()
	var lead *testNode
	waitUntil(t, labBound, "one leader", func() bool {
		lead = nil
		for _, nd := range l.nodes {
			if v, _ := nd.d.clusterView(); v.Leading {
				if lead != nil {
					return false
				}
				lead = nd
			}
		}
		return lead != nil
	})
	return lead
}

// own is the node's engine's status of the lab's contact.
func (l *clusterLab) own(nd *testNode) qualify.Status {
	a, _ := nd.d.eng.AoR(labAoR)
	for _, c := range a.Contacts {
		return c.Status
	}
	return qualify.NonQualified
}

// clusterStatus is the cluster's status of the lab's contact as nd sees
// it.
func (l *clusterLab) clusterStatus(nd *testNode) qualify.Status {
	s, _, _ := nd.d.votes(labAoR, l.labContact())
	return s
}

// everyNodeSays waits until every running node's cluster status is s.
func (l *clusterLab) everyNodeSays(t *testing.T, s qualify.Status, bound time.Duration, nodes ...*testNode) {
	t.Helper()
	waitUntil(t, bound, "every node sees the cluster say "+s.String(), func() bool {
		for _, nd := range nodes {
			if l.clusterStatus(nd) != s {
				return false
			}
		}
		return true
	})
}

// waitUntil polls cond every 20 ms until it holds; the test fails after
// bound.
func waitUntil(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(20 * time.Millisecond) // polling a real NATS cluster's state, not timing logic
	}
}

// labBound bounds every wait of the lab on its nodes (a detection,
// 1.8 s, a vote's or a record's way through NATS, a leader election): it
// only stops a broken run and decides nothing; what the tests hold is
// the order of the states, not how fast they come on a loaded host.
const labBound = 30 * time.Second

// TestClusterQuorumAll: with quorum=all, two of three vantages saying
// Unreachable leave the cluster Reachable (each node still says its own
// status); the third makes it Unreachable; one Reachable brings it back.
func TestClusterQuorumAll(t *testing.T) {
	l := newClusterLab(t, 3, "all")
	l.everyNodeSays(t, qualify.Reachable, labBound, l.nodes...)
	a, b, c := l.nodes[0], l.nodes[1], l.nodes[2]
	l.peer.Set(true, a.sip, b.sip)
	l.everyNodeCounts(t, "Unreachable", a, b)
	for _, nd := range l.nodes {
		if s := l.clusterStatus(nd); s != qualify.Reachable {
			t.Fatalf("quorum=all, 2 of 3 Unreachable: node %s says the cluster is %v, want Reachable", nd.name, s)
		}
	}
	l.peer.Set(true, c.sip)
	l.everyNodeSays(t, qualify.Unreachable, labBound, l.nodes...)
	l.peer.Set(false, a.sip)
	l.everyNodeSays(t, qualify.Reachable, labBound, l.nodes...)
}

// TestClusterQuorumAny: with quorum=any, one vantage saying Unreachable
// makes the cluster Unreachable, and it comes back only when every
// vantage says Reachable.
func TestClusterQuorumAny(t *testing.T) {
	l := newClusterLab(t, 3, "any")
	l.everyNodeSays(t, qualify.Reachable, labBound, l.nodes...)
	a, b := l.nodes[0], l.nodes[1]
	l.peer.Set(true, a.sip, b.sip)
	l.everyNodeSays(t, qualify.Unreachable, labBound, l.nodes...)
	// One Unreachable vote made the cluster Unreachable: the other node
	// cut off may not have found it yet. Until its vote counts there is
	// no "1 of 3 Unreachable" once a is answered again.
	l.everyNodeCounts(t, "Unreachable", a, b)
	l.peer.Set(false, a.sip)
	waitUntil(t, labBound, "a finds t Reachable", func() bool { return l.own(a) == qualify.Reachable })
	waitUntil(t, labBound, "the cluster counts a's Reachable", func() bool {
		_, votes, _ := l.nodes[2].d.votes(labAoR, l.labContact())
		return len(votes) == 3 && votes[0].Status != "" && countVotes(votes, "Reachable") == 2
	})
	for _, nd := range l.nodes {
		if s := l.clusterStatus(nd); s != qualify.Unreachable {
			t.Fatalf("quorum=any, 1 of 3 Unreachable: node %s says the cluster is %v, want Unreachable", nd.name, s)
		}
	}
	l.peer.Set(false, b.sip)
	l.everyNodeSays(t, qualify.Reachable, labBound, l.nodes...)
}

// everyNodeCounts waits until each of nodes finds the lab's contact s
// itself and every node counts their votes of s, and no other vote of
// s.
func (l *clusterLab) everyNodeCounts(t *testing.T, s string, nodes ...*testNode) {
	t.Helper()
	var names []string
	for _, nd := range nodes {
		names = append(names, nd.name)
	}
	what := strings.Join(names, ",")
	waitUntil(t, labBound, what+" find t "+s, func() bool {
		for _, nd := range nodes {
			if l.own(nd).String() != s {
				return false
			}
		}
		return true
	})
	waitUntil(t, labBound, "every node counts "+what+"'s votes "+s, func() bool {
		for _, nd := range l.nodes {
			_, votes, _ := nd.d.votes(labAoR, l.labContact())
			if countVotes(votes, s) != len(nodes) {
				return false
			}
			for _, v := range votes {
				if slices.Contains(names, v.Node) != (v.Status == s) {
					return false
				}
			}
		}
		return true
	})
}

// countVotes counts the votes of status s.
func countVotes(votes []api.Vote, s string) int {
	n := 0
	for _, v := range votes {
		if v.Status == s {
			n++
		}
	}
	return n
}

// TestClusterRestartTakesVerdictsBack: a node restarted while the two
// others find the contact Unreachable (its own probes are answered)
// serves the cluster's Unreachable from its first answer, before its own
// Reachable could count; its log says it joined before it started
// probing.
func TestClusterRestartTakesVerdictsBack(t *testing.T) {
	l := newClusterLab(t, 3, "majority")
	l.everyNodeSays(t, qualify.Reachable, labBound, l.nodes...)
	a, b, c := l.nodes[0], l.nodes[1], l.nodes[2]
	l.peer.Set(true, a.sip, b.sip)
	l.everyNodeSays(t, qualify.Unreachable, labBound, l.nodes...)
	c.stop()
	c = l.start(t, 2)
	l.nodes[2] = c
	waitUntil(t, 30*time.Second, "the restarted node serves HTTP", func() bool { return c.d.URL() != "" && healthy(c.d.URL()) })
	if s := l.clusterStatus(c); s != qualify.Unreachable {
		t.Fatalf("the restarted node's first answers: cluster status %v, want Unreachable taken back from the cluster", s)
	}
	for _, line := range []string{"cluster: joined as c: the cluster's verdicts read back", "cluster: took 1 verdicts back from the cluster (1 Unreachable)"} {
		if !strings.Contains(c.log.String(), line) {
			t.Fatalf("the restarted node's log does not say %q:\n%s", line, c.log.String())
		}
	}
	m := fetch(t, c.d.URL()+"/metrics")
	for _, series := range []string{`qualifyd_cluster_verdicts_taken_back{status="Reachable"} 0`, `qualifyd_cluster_verdicts_taken_back{status="Unreachable"} 1`} {
		if !strings.Contains(m, "\n"+series+"\n") {
			t.Errorf("the restarted node's metrics lack %s", series)
		}
	}
	waitUntil(t, labBound, "c finds t Reachable itself", func() bool { return l.own(c) == qualify.Reachable })
	if s := l.clusterStatus(c); s != qualify.Unreachable {
		t.Fatalf("after c's own Reachable: cluster %v, want Unreachable (2 of 3)", s)
	}
	l.metricsShowOneLeader(t)
}

// metricsShowOneLeader waits until every node's /metrics says it is in
// the cluster with every node up, probes the one contact, has no vote
// pending, and exactly one node says it leads.
func (l *clusterLab) metricsShowOneLeader(t *testing.T) {
	t.Helper()
	each := []string{"qualifyd_cluster_in_cluster 1", fmt.Sprintf(`qualifyd_cluster_members{state="up"} %d`, len(l.nodes)),
		`qualifyd_cluster_members{state="down"} 0`, "qualifyd_cluster_contacts_probed 1", "qualifyd_cluster_votes_pending 0"}
	var leading []string
	waitUntil(t, labBound, "every node's metrics: in the cluster, every node up, one leader", func() bool {
		leading = nil
		for _, nd := range l.nodes {
			m := fetch(t, nd.d.URL()+"/metrics")
			for _, series := range each {
				if !strings.Contains(m, "\n"+series+"\n") {
					return false
				}
			}
			if strings.Contains(m, "\nqualifyd_cluster_leading 1\n") {
				leading = append(leading, nd.name)
			} else if !strings.Contains(m, "\nqualifyd_cluster_leading 0\n") {
				return false
			}
		}
		return len(leading) == 1
	})
	if lead := l.leader(t); lead.name != leading[0] {
		t.Errorf("qualifyd_cluster_leading is 1 on %s, the cluster's view says %s leads", leading[0], lead.name)
	}
}

// TestClusterConfigErrors: the section's errors name its file and line,
// and --node is checked against it.
func TestClusterConfigErrors(t *testing.T) {
	sec := func(opts ...string) *pjsip.Config {
		c := &pjsip.Cluster{Name: "c", File: "q.conf", Line: 4}
		for i := 0; i+1 < len(opts); i += 2 {
			c.Options = append(c.Options, pjsip.ClusterOption{Key: opts[i], Value: opts[i+1], File: "q.conf", Line: 5 + i/2})
		}
		return &pjsip.Config{Cluster: c}
	}
	tests := []struct {
		name string
		conf *pjsip.Config
		node string
		is   error
		want string
	}{
		{"node without a section", &pjsip.Config{}, "a", nil, "--node a: the configuration has no type=cluster section (a single node has no name)"},
		{"unknown option", sec("leader", "a"), "a", pjsip.ErrUnknownOption,
			`q.conf:5: section "c": option "leader": unknown option: a cluster section has nodes, vantages, quorum, store, nats_url, member_ttl, lease_ttl, allow_two_nodes, name, tls_cert, tls_key, tls_ca, secret_file, insecure_routes, nats_ca, nats_cert, nats_key, nats_creds, nats_nkey, nats_user, nats_password_file, insecure_nats`},
		{"node not listed", sec("nodes", "a@h:1", "store", "/s"), "z", pjsip.ErrValue,
			`q.conf:4: section "c": invalid value: node "z" is not in nodes= (a)`},
	}
	shortWindow := sec("nodes", "a@h:1,b@h:2", "store", "/s", "lease_ttl", "6", "allow_two_nodes", "yes", "insecure_routes", "yes")
	shortWindow.Sinks = []*pjsip.Sink{{Name: "edge", Driver: "kamailio", File: "q.conf", Line: 9,
		HeartbeatInterval: 2 * time.Second, FailOpenAfter: 27 * time.Second}}
	tests = append(tests, struct {
		name string
		conf *pjsip.Config
		node string
		is   error
		want string
	}{"failopen within a failover", shortWindow, "a", pjsip.ErrValue,
		`q.conf:9: section "edge": option "failopen_after": invalid value: 27 s is no longer than a failover of the leader can leave the router without a heartbeat, with a margin (heartbeat_interval + lease_ttl + max(NATS election 19 s, lease_ttl) = 2 + 6 + 19 = 27 s: the leader's last beat up to heartbeat_interval before it died, the lease's stream elected and the key expired up to max(19, lease_ttl) after, a campaign within lease_ttl more, with room for a loaded host): the router would fail open during it`})
	for _, tt := range tests {
		_, _, err := ClusterConfig(tt.conf, tt.node)
		if err == nil || err.Error() != tt.want || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
		}
	}
	cfg, ok, err := ClusterConfig(sec("nodes", "a@h:1,b@h:2", "store", "/s", "quorum", "any", "allow_two_nodes", "yes", "insecure_routes", "yes"), "b")
	if err != nil || !ok || cfg.Self != "b" || cfg.Quorum != cluster.Any || cfg.Vantages != 2 {
		t.Fatalf("ClusterConfig = %+v, %v, %v", cfg, ok, err)
	}
	cfg, ok, err = ClusterConfig(sec("nodes", "a@h:1,b@h:2,c@h:3,d@h:4", "store", "/s", "insecure_routes", "yes"), "d")
	if err != nil || !ok || cfg.Vantages != 3 {
		t.Fatalf("4 nodes, vantages by default: %+v, %v, %v; want 3 vantages", cfg, ok, err)
	}
	if _, ok, err := ClusterConfig(&pjsip.Config{}, ""); ok || err != nil {
		t.Fatalf("no section: ok %v, err %v; want a single node", ok, err)
	}
}

// TestClusterKeysAndVerdictLine: a contact's key is AoR/URI both ways,
// and the log's line of a cluster verdict lists the votes.
func TestClusterKeysAndVerdictLine(t *testing.T) {
	if k := ContactKey("t", "sip:t@192.0.2.1"); k != "t/sip:t@192.0.2.1" {
		t.Fatalf("ContactKey %q", k)
	}
	for _, key := range []string{"t/sip:t@192.0.2.1", "a/b/sips:x@h", "/sip:h"} {
		aor, uri, ok := splitContactKey(key)
		if !ok || ContactKey(aor, uri) != key {
			t.Errorf("splitContactKey(%q) = %q, %q, %v", key, aor, uri, ok)
		}
	}
	if _, _, ok := splitContactKey("t/h"); ok {
		t.Error("a key without a SIP URI split")
	}
	v := cluster.Verdict{Contact: "t/sip:h", Status: qualify.Unreachable, Votes: []cluster.Vote{
		{Node: "a", Status: qualify.Unreachable}, {Node: "b", Status: qualify.Unreachable}, {Node: "c", Status: qualify.Reachable}}}
	if got, want := verdictLine("t", "sip:h", v), "qualifyd: cluster: Contact t/sip:h is now Unreachable (2 of 3 vantages: a=Unreachable b=Unreachable c=Reachable)"; got != want {
		t.Errorf("verdict line %q, want %q", got, want)
	}
}

// healthy reports whether base answers.
func healthy(base string) bool {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// TestClusterFileDisagreement: a node whose file assigns another AoR than
// the leader's is listed in every node's disagree, and logged.
func TestClusterFileDisagreement(t *testing.T) {
	l := &clusterLab{peer: newDropper(t), quorum: "majority"}
	l.extra = func(i int) []pjsip.AoR {
		if i != 2 {
			return nil
		}
		return []pjsip.AoR{{AoR: probe.AoR{Name: "u", Contacts: []string{"sip:u@192.0.2.1"}, Policy: &qualify.Policy{}}}}
	}
	startClusterLab(t, l, 3)
	lead := l.leader(t)
	want := "c"
	if lead.name == "c" {
		want = "a,b"
	}
	for _, nd := range l.nodes {
		waitUntil(t, labBound, nd.name+" lists the disagreeing nodes", func() bool {
			v, _ := nd.d.clusterView()
			return strings.Join(v.Disagree, ",") == want
		})
		waitUntil(t, labBound, nd.name+" logs them", func() bool {
			return strings.Contains(nd.log.String(), "cluster: the configuration of "+want+" differs from the leader's ("+lead.name+") in its AoRs")
		})
	}
}

// TestClusterReloadWithdrawsRemovedContact: a reload that removes a
// contact withdraws each node's vote of it through the daemon's event
// path (Removed), and the cluster's verdict of it goes from every node;
// the contact that stays keeps its verdict.
func TestClusterReloadWithdrawsRemovedContact(t *testing.T) {
	l := &clusterLab{peer: newDropper(t), quorum: "majority"}
	removed := false
	l.extra = func(int) []pjsip.AoR {
		if removed {
			return nil
		}
		return []pjsip.AoR{labAoRs(strings.Replace(l.labContact(), "sip:t@", "sip:u@", 1))}
	}
	startClusterLab(t, l, 3)
	u := ContactKey("u", strings.Replace(l.labContact(), "sip:t@", "sip:u@", 1))
	verdicts := func(nd *testNode, want int) bool { n, _ := nd.d.cluster.c.Verdicts(); return n == want }
	for _, nd := range l.nodes {
		waitUntil(t, labBound, nd.name+" has the verdicts of t and u", func() bool { return verdicts(nd, 2) })
	}
	l.mu.Lock()
	removed = true
	l.mu.Unlock()
	for _, nd := range l.nodes {
		if err := nd.d.Reload(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range l.nodes {
		waitUntil(t, labBound, nd.name+" counts no vote of u", func() bool {
			return countVotes(apiVotes(nd.d.cluster.c.Votes(u)), "Reachable") == 0
		})
		waitUntil(t, labBound, nd.name+" forgets u's verdict and keeps t's", func() bool {
			return verdicts(nd, 1) && nd.d.cluster.c.Status(u) == qualify.NonQualified && l.clusterStatus(nd) == qualify.Reachable
		})
	}
}

// apiVotes is votes as the API lists them.
func apiVotes(votes []cluster.Vote) []api.Vote {
	out := make([]api.Vote, len(votes))
	for i, v := range votes {
		out[i] = api.Vote{Node: v.Node, Status: v.Status.String(), Draining: v.Draining}
	}
	return out
}

// bodies is a webhook receiver that keeps the kind and the expires of
// every body, with the time it arrived.
type bodies struct {
	mu   sync.Mutex
	seen []body
}

// body is one body a receiver got.
type body struct {
	kind    string
	expires time.Time
	at      time.Time
}

func (b *bodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Kind    string    `json:"kind"`
		Expires time.Time `json:"expires"`
	}
	_ = json.NewDecoder(r.Body).Decode(&p)
	b.mu.Lock()
	b.seen = append(b.seen, body{p.Kind, p.Expires, time.Now()})
	b.mu.Unlock()
}

// all returns the bodies so far.
func (b *bodies) all() []body {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]body(nil), b.seen...)
}

// TestClusterRemovedSinkFailsOpenWithoutItsLeader: a sink removed from
// the file of every node but the leader, which dies before it reloads:
// the new leader never ran the sink and releases nothing, so its router
// hears nothing more and fails open by itself once the last heartbeat's
// expires has passed, while the sink every file keeps goes on
// heartbeating from the new leader.
func TestClusterRemovedSinkFailsOpenWithoutItsLeader(t *testing.T) {
	keep, gone := &bodies{}, &bodies{}
	keepSrv, goneSrv := httptest.NewServer(keep), httptest.NewServer(gone)
	t.Cleanup(keepSrv.Close)
	t.Cleanup(goneSrv.Close)
	l := &clusterLab{peer: newDropper(t), quorum: "majority"}
	removed := map[int]bool{}
	// failOpen is the least the failover check accepts: more than
	// heartbeat_interval + lease_ttl + max(ElectionBound, lease_ttl).
	failOpen := time.Second + cluster.FailoverGap(clusterTTL*time.Second) + time.Second
	hook := func(name, url string) *pjsip.Sink {
		return &pjsip.Sink{Name: name, Driver: "webhook", URL: url, AoRs: []string{labAoR}, File: "q.conf", Line: 9,
			Timeout: 5 * time.Second, HeartbeatInterval: time.Second, FailOpenAfter: failOpen}
	}
	l.sinks = func(i int) []*pjsip.Sink {
		if removed[i] {
			return []*pjsip.Sink{hook("keep", keepSrv.URL)}
		}
		return []*pjsip.Sink{hook("keep", keepSrv.URL), hook("gone", goneSrv.URL)}
	}
	startClusterLab(t, l, 3)
	lead := l.leader(t)
	waitUntil(t, labBound, "the leader heartbeats both sinks", func() bool { return len(keep.all()) > 0 && len(gone.all()) > 0 })
	l.mu.Lock()
	for i, nd := range l.nodes {
		removed[i] = nd != lead
	}
	l.mu.Unlock()
	for _, nd := range l.nodes {
		if nd != lead {
			if err := nd.d.Reload(context.Background(), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	lead.stop()
	stopped := time.Now()
	last := gone.all()
	keptBefore := len(keep.all())
	waitUntil(t, labBound, "the new leader heartbeats the kept sink", func() bool {
		n := 0
		for _, b := range keep.all()[keptBefore:] {
			if b.kind == "heartbeat" {
				n++
			}
		}
		return n >= 3
	})
	if got := gone.all(); len(got) != len(last) {
		t.Fatalf("the removed sink's router got %+v after its leader stopped, want nothing (the new leader never ran it)", got[len(last):])
	}
	expires := last[len(last)-1].expires
	t.Logf("the removed sink's last body expires %v after its leader stopped (failopen_after %v)", expires.Sub(stopped), failOpen)
	if expires.IsZero() || expires.After(stopped.Add(failOpen)) {
		t.Fatalf("the removed sink's last body expires at %v: want its router to fail open within failopen_after of the stop", expires)
	}
}

// TestClusterReportAllRestoresALostVote: a vote the cluster no longer
// holds (as when the sinks' subscription lost the edge that would have
// published it) is published again by reportAll, the daemon's answer to
// a lost event, from the engine's level.
func TestClusterReportAllRestoresALostVote(t *testing.T) {
	l := newClusterLab(t, 3, "majority")
	a, b := l.nodes[0], l.nodes[1]
	key := ContactKey(labAoR, l.labContact())
	voteOf := func(nd *testNode, node string) qualify.Status {
		for _, v := range nd.d.cluster.c.Votes(key) {
			if v.Node == node {
				return v.Status
			}
		}
		return qualify.NonQualified
	}
	waitUntil(t, labBound, "b counts a's vote Reachable", func() bool { return voteOf(b, "a") == qualify.Reachable })
	a.d.cluster.c.Report(key, qualify.NonQualified) // the vote lost
	waitUntil(t, labBound, "b no longer counts a's vote", func() bool { return voteOf(b, "a") == qualify.NonQualified })
	if own := l.own(a); own != qualify.Reachable {
		t.Fatalf("a's own status %v, want Reachable", own)
	}
	a.d.cluster.reportAll()
	waitUntil(t, labBound, "b counts a's vote again", func() bool { return voteOf(b, "a") == qualify.Reachable })
}

// TestNATSErrorsAreLimited: a host that keeps dialling a route port
// gets natsLines of its refusals logged a minute; another kind of
// refusal meanwhile is logged at once; the rest are counted, and the
// count is logged with the first line of the next minute.
func TestNATSErrorsAreLimited(t *testing.T) {
	var out bytes.Buffer
	l, err := NewLog(&out, "text", func(dst []byte, _ time.Time) []byte { return dst })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	n := &node{d: &Daemon{log: l}}
	for i := range 25 {
		n.serverLog(fmt.Sprintf("127.0.0.1:4000%d - rid:%d - TLS route handshake error: remote error: tls: bad certificate", i%10, i))
		now = now.Add(time.Second)
	}
	n.serverLog("127.0.0.1:41000 - rid:50 - authentication error") // another kind, in the same minute
	now = now.Add(natsWindow)                                      // a quiet minute, then one more refusal
	n.serverLog("127.0.0.1:50000 - rid:99 - TLS route handshake error: remote error: tls: bad certificate")
	l.Close(time.Minute)

	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i := range got {
		got[i] = strings.TrimPrefix(got[i], "[] ")
	}
	if len(got) != natsLines+3 {
		t.Fatalf("%d lines, want %d (the first %d, the other kind's, the count, the new minute's line):\n%s", len(got), natsLines+3, natsLines, out.String())
	}
	for i, line := range got[:natsLines] {
		if want := fmt.Sprintf("rid:%d - TLS route handshake error", i); !strings.Contains(line, want) || !strings.HasPrefix(line, "qualifyd: cluster: NATS: ") {
			t.Errorf("line %d %q, want the refusal %q", i, line, want)
		}
	}
	if !strings.Contains(got[natsLines], "rid:50 - authentication error") {
		t.Errorf("line %q, want the other kind's refusal", got[natsLines])
	}
	if want := fmt.Sprintf("qualifyd: cluster: NATS: %d more errors were not logged (at most %d of a kind a minute)", 25-natsLines, natsLines); got[natsLines+1] != want {
		t.Errorf("count line %q, want %q", got[natsLines+1], want)
	}
	if !strings.Contains(got[natsLines+2], "rid:99 - TLS route handshake error") {
		t.Errorf("last line %q, want the new minute's refusal", got[natsLines+2])
	}
}

// TestLineLimitWindows: the window starts at its first line, holds
// every line of a kind past natsLines, and tells the held count once;
// kinds past natsKinds share one count.
func TestLineLimitWindows(t *testing.T) {
	var l lineLimit
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for i := range natsLines {
		if pass, held := l.take(t0.Add(time.Duration(i)*time.Millisecond), "a"); !pass || held != 0 {
			t.Fatalf("line %d: pass %v held %d, want through with nothing held", i, pass, held)
		}
	}
	if pass, held := l.take(t0.Add(natsWindow-time.Nanosecond), "a"); pass || held != 0 {
		t.Fatalf("line past the limit: pass %v held %d, want held", pass, held)
	}
	if pass, held := l.take(t0.Add(natsWindow), "a"); !pass || held != 1 {
		t.Fatalf("first line of the next window: pass %v held %d, want through with 1 told", pass, held)
	}
	if pass, held := l.take(t0.Add(natsWindow+time.Second), "a"); !pass || held != 0 {
		t.Fatalf("second line of the window: pass %v held %d, want through, the count told once", pass, held)
	}
	t1 := t0.Add(natsWindow + 2*time.Second)
	for k := 1; k < natsKinds; k++ { // "a" and these fill the kinds
		if pass, _ := l.take(t1, fmt.Sprint("kind ", k)); !pass {
			t.Fatalf("kind %d's first line held", k)
		}
	}
	passed := 0
	for k := range 2 * natsLines { // new kinds past natsKinds: one count
		if pass, _ := l.take(t1, fmt.Sprint("more ", k)); pass {
			passed++
		}
	}
	if passed != natsLines {
		t.Fatalf("%d lines of the kinds past natsKinds through, want %d", passed, natsLines)
	}
}

// TestNATSKind: a connection's error loses its address and id.
func TestNATSKind(t *testing.T) {
	for line, want := range map[string]string{
		"127.0.0.1:50144 - rid:9 - TLS route handshake error: remote error: tls: bad certificate":             "TLS route handshake error: remote error: tls: bad certificate",
		"[::1]:4222 - cid:12 - authentication error - user \"qualifyd\"":                                      "authentication error - user \"qualifyd\"",
		"Error trying to connect to route (attempt 1): dial tcp 127.0.0.1:42365: connect: connection refused": "Error trying to connect to route (attempt 1): dial tcp 127.0.0.1:42365: connect: connection refused",
	} {
		if got := natsKind(line); got != want {
			t.Errorf("natsKind(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestCheckFailover: a failover of the leader leaves a router without a
// heartbeat for up to heartbeat_interval (the last beat before the
// leader died) + max(ElectionBound, lease_ttl) (the lease's stream
// elected when the dead node's server led it, and the key expired) + a
// campaign's attempt and retry; failopen_after must exceed
// heartbeat_interval + lease_ttl + max(ElectionBound, lease_ttl), or the
// router fails open mid-failover.
func TestCheckFailover(t *testing.T) {
	for _, tc := range []struct {
		beat, lease, failopen time.Duration
		want                  string
	}{
		{pjsip.DefaultHeartbeatInterval, cluster.DefaultLeaseTTL, pjsip.DefaultFailOpenAfter, ""}, // the defaults
		{10 * time.Second, 6 * time.Second, 36 * time.Second, ""},
		{10 * time.Second, 6 * time.Second, 30 * time.Second,
			`q.conf:9: section "edge": option "failopen_after": invalid value: 30 s is no longer than a failover of the leader can leave the router without a heartbeat, with a margin (heartbeat_interval + lease_ttl + max(NATS election 19 s, lease_ttl) = 10 + 6 + 19 = 35 s: the leader's last beat up to heartbeat_interval before it died, the lease's stream elected and the key expired up to max(19, lease_ttl) after, a campaign within lease_ttl more, with room for a loaded host): the router would fail open during it`},
		{1 * time.Second, 3 * time.Second, 9 * time.Second, // 2 x lease_ttl: an election of the lease's stream outlasts it
			`q.conf:9: section "edge": option "failopen_after": invalid value: 9 s is no longer than a failover of the leader can leave the router without a heartbeat, with a margin (heartbeat_interval + lease_ttl + max(NATS election 19 s, lease_ttl) = 1 + 3 + 19 = 23 s: the leader's last beat up to heartbeat_interval before it died, the lease's stream elected and the key expired up to max(19, lease_ttl) after, a campaign within lease_ttl more, with room for a loaded host): the router would fail open during it`},
		{5 * time.Second, 30 * time.Second, 64 * time.Second, // lease_ttl longer than an election
			`q.conf:9: section "edge": option "failopen_after": invalid value: 64 s is no longer than a failover of the leader can leave the router without a heartbeat, with a margin (heartbeat_interval + lease_ttl + max(NATS election 19 s, lease_ttl) = 5 + 30 + 30 = 65 s: the leader's last beat up to heartbeat_interval before it died, the lease's stream elected and the key expired up to max(19, lease_ttl) after, a campaign within lease_ttl more, with room for a loaded host): the router would fail open during it`},
		{5 * time.Second, 30 * time.Second, 66 * time.Second, ""},
		{0, 7 * time.Second, 5 * time.Second, ""}, // no heartbeat: nothing fails open
	} {
		s := &pjsip.Sink{Name: "edge", Driver: "kamailio", File: "q.conf", Line: 9, HeartbeatInterval: tc.beat, FailOpenAfter: tc.failopen}
		err := checkFailover([]*pjsip.Sink{s}, tc.lease)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && (got != tc.want || !errors.Is(err, pjsip.ErrValue)) {
			t.Errorf("heartbeat_interval %v, lease_ttl %v, failopen_after %v: %v, want %q", tc.beat, tc.lease, tc.failopen, err, tc.want)
		}
	}
}

// TestWarnInsecureNATS: insecure_nats=yes is warned of at every start.
func TestWarnInsecureNATS(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLog(&buf, "text", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{d: &Daemon{log: log}}
	n.cfg.NATSURL, n.cfg.InsecureNATS = "nats://q:s3cret@n:4222", true
	n.warnSecurity(time.Time{}, time.Now())
	log.Close(time.Second)
	if want := "cluster: insecure_nats=yes: the password or token to the external NATS (nats_url) may cross the network in clear"; !strings.Contains(buf.String(), want) {
		t.Fatalf("log %q, want %q", buf.String(), want)
	}
}

// TestClusterDrainReachesTheSinks: a call's 503 with Retry-After heard
// by one node only drains the contact there; its vote carries the drain,
// and the leader's sinks see the contact out of routing as draining
// until that node's drain ends at its first probe after the pause.
func TestClusterDrainReachesTheSinks(t *testing.T) {
	l := newClusterLab(t, 3, "majority")
	l.everyNodeSays(t, qualify.Reachable, labBound, l.nodes...)
	lead := l.leader(t)
	heard := l.nodes[0]
	if heard == lead {
		heard = l.nodes[1]
	}
	contact := func() engine.ContactSnapshot {
		a, _ := clusterSource{lead.d.eng, lead.d.cluster.c}.AoR(labAoR)
		return a.Contacts[0]
	}
	drain := observe.Observation{AoR: labAoR, Outcome: observe.Failed, Code: 503, RetryAfter: 5 * time.Second}
	if tally := heard.d.eng.Observe([]observe.Observation{drain}); tally.Accepted != 1 {
		t.Fatalf("observe: %+v", tally)
	}
	drainVote := func() bool {
		_, votes, _ := lead.d.votes(labAoR, l.labContact())
		return slices.ContainsFunc(votes, func(v api.Vote) bool { return v.Draining && v.Node == heard.name })
	}
	waitUntil(t, labBound, "the leader's sinks see the contact draining, and its API the vote", func() bool {
		c := contact()
		return c.Phase == qualify.Draining && !c.Routable && c.Status == qualify.Reachable && drainVote()
	})
	waitUntil(t, labBound, "the drain ends", func() bool {
		c := contact()
		return c.Phase == qualify.Healthy && c.Routable
	})
	if !strings.Contains(lead.log.String(), "is now draining (") {
		t.Errorf("no drain line in the leader's log:\n%s", lead.log.String())
	}
	if drainVote() {
		t.Error("a draining vote after the drain")
	}
}
