package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// testTTL is the member and lease TTL of the real-server tests.
const testTTL = 3 * time.Second

// edge is one call of the Leading hook, with its time and, for a true
// edge, the send time of the create or renewal that took the lease, as
// the Cluster recorded it.
type edge struct {
	leading bool
	at      time.Time
	sent    time.Time
}

// testNode is one running node of a test cluster.
type testNode struct {
	c        *Cluster
	cfg      Config
	cancel   context.CancelFunc
	done     chan struct{}
	verdicts chan Verdict

	mu    sync.Mutex
	edges []edge
}

// leadingEdges returns the Leading hook's calls so far.
func (n *testNode) leadingEdges() []edge {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]edge(nil), n.edges...)
}

// freePorts returns n route addresses on loopback that were free and
// that no other test of this binary was given.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for range n {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", peertest.FreePort(t, "tcp")))
	}
	return out
}

// testConfigs returns the configuration of each of n nodes named a, b,
// c..., on loopback, each with its own store.
func testConfigs(t testing.TB, n int, q Quorum) []Config {
	t.Helper()
	routes := freePorts(t, n)
	var nodes []Node
	for i, r := range routes {
		nodes = append(nodes, Node{Name: string(rune('a' + i)), Route: r})
	}
	var cfgs []Config
	for _, nd := range nodes {
		c := Config{Nodes: nodes, Quorum: q, Store: t.TempDir(), MemberTTL: testTTL, LeaseTTL: testTTL, AllowTwoNodes: n == 2}
		if err := c.Finish(nd.Name); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, c)
	}
	return cfgs
}

// startNode starts one node and stops it at the test's end.
func startNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	return startNodeWith(t, cfg, nil)
}

// startNodeWith is startNode with the Configured hook configured.
func startNodeWith(t testing.TB, cfg Config, configured func(string) bool) *testNode {
	t.Helper()
	n := &testNode{cfg: cfg, done: make(chan struct{}), verdicts: make(chan Verdict, 1024)}
	hooks := Hooks{
		Leading: func(l bool) {
			at := time.Now()
			n.c.mu.Lock() // no renewal runs meanwhile: the hook is called from the lease's loop
			sent := n.c.heldSent
			n.c.mu.Unlock()
			n.mu.Lock()
			n.edges = append(n.edges, edge{l, at, sent})
			n.mu.Unlock()
		},
		Verdict:    func(v Verdict) { n.verdicts <- v },
		Configured: configured,
	}
	c, err := New(cfg, hooks)
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() {
		defer close(n.done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(n.stop)
	return n
}

// jetStream is n's connection's JetStream, and a context that bounds a
// request by the TTL.
func (n *testNode) jetStream(t *testing.T) (jetstream.JetStream, context.Context, context.CancelFunc) {
	t.Helper()
	js, err := jetstream.New(n.c.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTTL)
	return js, ctx, cancel
}

// stop ends the node's Run and waits for it.
func (n *testNode) stop() {
	n.cancel()
	<-n.done
}

// startCluster starts n nodes and waits until each has read the cluster
// back and sees every node up.
func startCluster(t *testing.T, n int, q Quorum) []*testNode {
	t.Helper()
	var nodes []*testNode
	for _, cfg := range testConfigs(t, n, q) {
		nodes = append(nodes, startNode(t, cfg))
	}
	for _, nd := range nodes {
		waitFor(t, 30*time.Second, fmt.Sprintf("node %s sees %d members up", nd.cfg.Self, n), func() bool {
			return upCount(nd.c.View()) == n
		})
		select {
		case <-nd.c.Ready():
		case <-time.After(10 * time.Second):
			t.Fatalf("node %s not ready", nd.cfg.Self)
		}
	}
	return nodes
}

// upCount counts the members a view sees up.
func upCount(v View) int {
	n := 0
	for _, m := range v.Members {
		if m.Up {
			n++
		}
	}
	return n
}

// pollEvery is how often waitFor looks at the state it waits for.
const pollEvery = 10 * time.Millisecond

// waitFor polls cond until it holds, failing the test after limit: the
// real servers' timers run in real time.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		<-tick.C
	}
	return time.Since(start)
}

// leaders returns the nodes that lead now.
func leaders(nodes []*testNode) []*testNode {
	var out []*testNode
	for _, n := range nodes {
		if n.c.Leading() {
			out = append(out, n)
		}
	}
	return out
}

// oneLeader waits until exactly one of nodes leads and returns it.
func oneLeader(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	waitFor(t, 10*testTTL, "one leader", func() bool { return len(leaders(nodes)) == 1 })
	return leaders(nodes)[0]
}

// others returns nodes but n.
func others(nodes []*testNode, n *testNode) []*testNode {
	var rest []*testNode
	for _, o := range nodes {
		if o != n {
			rest = append(rest, o)
		}
	}
	return rest
}

// killServer stops a node's embedded server without letting its Run
// clean up: the node loses NATS as a crashed host's peers see it.
func (n *testNode) killServer() { n.c.server().Shutdown() }

// stamp is one entry of a bucket's key as a server delivered it: the
// server's own record of when it wrote it.
type stamp struct {
	rev     uint64
	op      jetstream.KeyValueOp
	value   string
	created time.Time
}

// keyLog records every entry of one key that a watch delivers, through a
// node's own connection.
type keyLog struct {
	mu      sync.Mutex
	entries []stamp
}

// watchKey records key's entries in bucket as node n's server delivers
// them, until the test ends.
func watchKey(t *testing.T, n *testNode, bucket, key string) *keyLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	js, err := jetstream.New(n.c.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	l := &keyLog{}
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			l.mu.Lock()
			l.entries = append(l.entries, stamp{e.Revision(), e.Operation(), string(e.Value()), e.Created()})
			l.mu.Unlock()
		}
	}()
	return l
}

// last returns the latest entry recorded that match holds for, ok false
// for none.
func (l *keyLog) last(match func(stamp) bool) (stamp, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.entries) - 1; i >= 0; i-- {
		if match(l.entries[i]) {
			return l.entries[i], true
		}
	}
	return stamp{}, false
}

// killAfterRenewal waits until log holds a write by node n newer than any
// it held before, then kills n's server at once: the write just seen is
// n's last that the cluster takes, as the next one is due a third of the
// TTL later. It returns that write.
func killAfterRenewal(t *testing.T, n *testNode, log *keyLog, written func(stamp) bool) stamp {
	t.Helper()
	before, _ := log.last(written)
	var last stamp
	waitFor(t, 4*testTTL, n.cfg.Self+" renews", func() bool {
		var ok bool
		last, ok = log.last(written)
		return ok && last.rev > before.rev
	})
	n.killServer()
	if again, _ := log.last(written); again.rev != last.rev {
		t.Fatalf("%s renewed again (revision %d after %d) before its server died: the test was descheduled for a third of the TTL", n.cfg.Self, again.rev, last.rev)
	}
	return last
}

// put matches the key's writes of value.
func put(value string) func(stamp) bool {
	return func(s stamp) bool { return s.op == jetstream.KeyValuePut && s.value == value }
}

// TestMembershipSeesThreeThenTwo: a node whose server dies leaves the
// others' view when the members bucket's TTL removes its key. Asserted
// on the Cluster's own records, not on the test's clock: a marks c down
// (Member.Since, when a's watch delivered the removal) no earlier than
// the TTL after the send time of c's last renewal that succeeded (the
// server stamps it later still), and within twice the TTL of it (the
// removal, its delivery and, when c's server led the members' stream or
// held a's watch, a stream leader election and a's new watch). The
// waits are deadlines only.
func TestMembershipSeesThreeThenTwo(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	v := nodes[0].c.View()
	if !v.InCluster || v.Self != "a" || len(v.Members) != 3 {
		t.Fatalf("view %+v", v)
	}
	c := nodes[2]
	c.killServer()
	c.c.mu.Lock()
	renewed := c.c.memberSent // no renewal succeeds after the kill
	c.c.mu.Unlock()
	waitFor(t, 10*testTTL, "a sees c leave", func() bool { return upCount(nodes[0].c.View()) == 2 })
	for _, m := range nodes[0].c.View().Members {
		if m.Name != "c" {
			continue
		}
		left := m.Since.Sub(renewed)
		t.Logf("a marked c down %v after c's last renewal was sent (member TTL %v)", left, testTTL)
		if m.Up || left < testTTL || left > 2*testTTL {
			t.Errorf("c: %+v, %v after its last renewal was sent (%v): want down, from the TTL %v to twice it", m, left, renewed, testTTL)
		}
	}
	waitFor(t, 10*testTTL, "c knows it is out", func() bool { return !c.c.View().InCluster })
}

// TestLeaseOneLeaderThenFailover: when the leader's server dies, another
// node creates the lease once the TTL has removed it. Asserted on the
// lease key's server stamps and the Cluster's own records, not on the
// test's clock: the new leader's create comes no earlier than the TTL
// after the old leader's last renewal (never two leaders) and within two
// TTLs of it (the removal, the candidate's retry and, when the dead
// server led the bucket's stream, a stream leader election); the old
// leader's Leading() deadline is a third of the TTL before the create,
// and its hook gave up no earlier than that deadline.
func TestLeaseOneLeaderThenFailover(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	old := oneLeader(t, nodes)
	for _, n := range nodes {
		waitFor(t, 10*testTTL, n.cfg.Self+" sees the leader", func() bool { return n.c.View().Leader == old.cfg.Self })
	}
	var watcher *testNode
	for _, n := range nodes {
		if n != old {
			watcher = n
		}
	}
	log := watchKey(t, watcher, bucketLease, leaseKey)
	renewed := killAfterRenewal(t, old, log, put(old.cfg.Self))
	old.c.mu.Lock()
	sent := old.c.heldSent // the send time of that renewal: it gives up 2/3 of the TTL later
	oldDeadline := old.c.heldUntil
	old.c.mu.Unlock()
	var next *testNode
	waitFor(t, 10*testTTL, "a new leader", func() bool {
		for _, n := range leaders(nodes) {
			if n != old {
				next = n
				return true
			}
		}
		return false
	})
	// Leading() turns true before the hook is called: wait for the edge.
	waitFor(t, testTTL, "the new leader's Leading hook says true", func() bool {
		e := next.leadingEdges()
		return len(e) > 0 && e[len(e)-1].leading
	})
	newEdges := next.leadingEdges()
	took := newEdges[len(newEdges)-1]
	gap := took.sent.Sub(renewed.created)
	t.Logf("new leader %s sent the create that took the lease %v after the old leader's last renewal (lease TTL %v)", next.cfg.Self, gap, testTTL)
	if !took.leading || gap > 2*testTTL {
		t.Errorf("new leader's edge %+v: sent %v after the old lease's last renewal, want within twice the TTL %v", took, gap, testTTL)
	}
	if old.c.Leading() || old.c.View().InCluster {
		t.Errorf("the old leader still believes it leads or is in the cluster: %+v", old.c.View())
	}
	// The server stamps the create no earlier than the old lease's
	// expiry, the renewal's stamp + TTL, and answers after it.
	if sent.IsZero() || sent.After(renewed.created) || took.at.Sub(oldDeadline) < testTTL/3 {
		t.Errorf("old leader's last renewal sent %v, stamped %v, deadline %v; new leader took it at %v: want the deadline at least a third of the TTL before", sent, renewed.created, oldDeadline, took.at)
	}
	waitFor(t, testTTL, "the old leader's Leading hook says false", func() bool {
		e := old.leadingEdges()
		return len(e) > 0 && !e[len(e)-1].leading
	})
	oldEdges := old.leadingEdges()
	if gaveUp := oldEdges[len(oldEdges)-1]; gaveUp.leading || gaveUp.at.Before(oldDeadline) {
		t.Errorf("old leader's last edge %+v, want false, not before its deadline %v", gaveUp, oldDeadline)
	}
}

func TestLostNATSKeepsOwnView(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	n := nodes[1]
	n.c.Report("t/sip:10.0.0.1:5060", qualify.Reachable)
	n.killServer()
	// Its membership and its lease (if it held it) each lapse 2/3 of
	// their TTL after their last renewal, which need not come together.
	waitFor(t, 2*testTTL, "b knows it is out and does not lead", func() bool { return !n.c.View().InCluster && !n.c.Leading() })
	v := n.c.View()
	if v.Leading || v.Leader != "" || upCount(v) != 3 {
		t.Errorf("view after losing NATS %+v: want not leading, the last members seen", v)
	}
	if !n.c.Report("t/sip:10.0.0.1:5060", qualify.Unreachable) {
		t.Errorf("Report refused while NATS is lost")
	}
}

// nextVerdict waits for the next verdict the observer o emits.
func nextVerdict(t *testing.T, o *testNode, step int) Verdict {
	t.Helper()
	select {
	case v := <-o.verdicts:
		return v
	case <-time.After(2 * testTTL):
		t.Fatalf("step %d: no verdict on %s (status %v)", step, o.cfg.Self, o.c.l.tally.status)
	}
	return Verdict{}
}

// votesOf formats a verdict's votes as "a=R b=U c=-".
func votesOf(v Verdict) string {
	s := ""
	for _, vt := range v.Votes {
		l := "-"
		switch vt.Status {
		case qualify.Reachable:
			l = "R"
		case qualify.Unreachable:
			l = "U"
		}
		s += fmt.Sprintf(" %s=%s", vt.Node, l)
	}
	return s
}

// TestVerdictQuorum runs vantage disagreements through the votes bucket:
// each step reports one node's status; the observer (a) must emit
// exactly the verdicts listed, in order, each with the votes that
// decided it. A step that must not change the cluster's status is
// followed by one that does, so that a wrong early verdict shows up as
// the wrong next verdict.
func TestVerdictQuorum(t *testing.T) {
	type step struct {
		node   int
		status qualify.Status
		// want is the verdict the step causes ("" none): the new status
		// and the votes.
		want string
	}
	tests := []struct {
		q     Quorum
		steps []step
	}{
		{Majority, []step{
			{0, R, ""}, {1, R, "Reachable a=R b=R c=-"},
			{0, U, ""}, {2, R, ""}, {1, U, "Unreachable a=U b=U c=R"},
			{2, U, ""}, {0, R, ""}, {1, R, "Reachable a=R b=R c=U"},
		}},
		{All, []step{
			{0, U, ""}, {1, U, ""}, {2, U, "Unreachable a=U b=U c=U"},
			{1, R, "Reachable a=U b=R c=U"},
		}},
		{Any, []step{
			{0, R, ""}, {1, R, ""}, {2, R, "Reachable a=R b=R c=R"},
			{1, U, "Unreachable a=R b=U c=R"},
			{1, R, "Reachable a=R b=R c=R"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.q.String(), func(t *testing.T) {
			nodes := startCluster(t, 3, tt.q)
			const contact = "trunk/sip:192.0.2.1:5060"
			for i, s := range tt.steps {
				nodes[s.node].c.Report(contact, s.status)
				// The nodes publish on their own; wait until every node
				// has the vote, so that the votes land in the steps' order.
				for _, o := range nodes {
					waitFor(t, testTTL, "the vote reaches "+o.cfg.Self, func() bool {
						return o.vote(contact, nodes[s.node].cfg.Self) == s.status
					})
				}
				if s.want == "" {
					continue
				}
				v := nextVerdict(t, nodes[0], i)
				if got := v.Status.String() + votesOf(sortedVotes(v)); v.Contact != contact || got != s.want {
					t.Fatalf("step %d: verdict %q, want %q", i, got, s.want)
				}
			}
			select {
			case v := <-nodes[0].verdicts:
				t.Errorf("a verdict no step caused: %+v", v)
			default:
			}
			for _, n := range nodes {
				if n.c.Status(contact) != nodes[0].c.Status(contact) {
					t.Errorf("%s says %v, a says %v", n.cfg.Self, n.c.Status(contact), nodes[0].c.Status(contact))
				}
			}
		})
	}
}

// sortedVotes returns v with its votes in name order.
func sortedVotes(v Verdict) Verdict {
	slices.SortFunc(v.Votes, func(a, b Vote) int { return strings.Compare(a.Node, b.Node) })
	return v
}

// vote is node's vote on contact as n has counted it.
func (n *testNode) vote(contact, node string) qualify.Status {
	n.c.l.mu.Lock()
	defer n.c.l.mu.Unlock()
	return n.c.l.tally.counted(contact, node).Status
}

// TestRestartTakesVerdictsBack: a node restarted while the votes alone
// decide nothing (quorum=all: a and b say Unreachable, c has withdrawn)
// reads the cluster's recorded Unreachable back before Ready; without
// the record it would say NonQualified.
func TestRestartTakesVerdictsBack(t *testing.T) {
	nodes := startCluster(t, 3, All)
	const contact = "trunk/sip:192.0.2.9:5060"
	for _, n := range nodes {
		n.c.Report(contact, qualify.Unreachable)
	}
	if v := nextVerdict(t, nodes[2], 0); v.Status != qualify.Unreachable {
		t.Fatalf("verdict %+v", v)
	}
	nodes[2].c.Report(contact, qualify.NonQualified) // a=U b=U c=-: stays Unreachable
	// Neither wait is a bound of the design (a vote's and a record's way
	// through three replicas): the bounds only stop a broken run, and
	// are wide for a loaded machine under the race detector, where a
	// watch's consumer can be lost and made again (nats.go's "consumer
	// not active", the lag check's restart) on the way.
	waitFor(t, 10*testTTL, "c's vote is withdrawn", func() bool { return nodes[0].vote(contact, "c") == qualify.NonQualified })
	waitFor(t, 10*testTTL, "c sees the recorded verdict", func() bool {
		nodes[2].c.l.mu.Lock()
		defer nodes[2].c.l.mu.Unlock()
		return nodes[2].c.l.recorded[contact] == qualify.Unreachable
	})

	nodes[2].stop()
	again := startNode(t, nodes[2].cfg)
	select {
	case <-again.c.Ready():
	case <-time.After(4 * testTTL):
		t.Fatal("the restarted node is not ready")
	}
	if s := again.c.Status(contact); s != qualify.Unreachable {
		t.Errorf("restarted c says %v, want the cluster's Unreachable", s)
	}
	if v := again.vote(contact, "a"); v != qualify.Unreachable {
		t.Errorf("restarted c has a's vote %v", v)
	}
}

// TestJetStreamQuorumLostSurvivorAlone: with two of three servers dead,
// the survivor's JetStream has no quorum: it leaves the cluster in its
// own eyes, never leads, and keeps its last view.
func TestJetStreamQuorumLostSurvivorAlone(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	waitFor(t, 2*testTTL, "one leader", func() bool { return len(leaders(nodes)) == 1 })
	var survivor *testNode
	for _, n := range nodes {
		if n.c.Leading() {
			survivor = n // the hardest case: the leader survives
		}
	}
	for _, n := range nodes {
		if n != survivor {
			n.killServer()
		}
	}
	took := waitFor(t, 2*testTTL, "the survivor is alone", func() bool {
		v := survivor.c.View()
		return !v.InCluster && !v.Leading
	})
	t.Logf("the surviving leader stopped leading and left %v after losing two of three servers", took)
	// Leading() turns false at the deadline itself; the hook follows when
	// the renewal in flight gives up, at the same deadline.
	waitFor(t, testTTL, "the Leading hook says false", func() bool {
		e := survivor.leadingEdges()
		return len(e) > 0 && !e[len(e)-1].leading
	})
	if v := survivor.c.View(); v.Leader != "" || len(v.Members) != 3 {
		t.Errorf("view %+v: want no leader known, every member listed", v)
	}
}

// TestDrainTravels: one vantage's vote that its peer is draining makes
// every node hold the Reachable contact as draining, with a verdict of
// its own, and its vote without the drain ends it everywhere.
func TestDrainTravels(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	const contact = "trunk/sip:192.0.2.1:5060"
	for _, n := range nodes {
		n.c.Report(contact, R)
	}
	for _, o := range nodes { // the status first, so that the drain's verdict is one of its own
		for _, n := range nodes {
			waitFor(t, testTTL, "the votes reach "+o.cfg.Self, func() bool { return o.vote(contact, n.cfg.Self) == R })
		}
	}
	for _, drain := range []bool{true, false} {
		nodes[2].c.ReportDrain(contact, R, drain)
		for _, o := range nodes {
			waitFor(t, testTTL, fmt.Sprintf("%s sees draining %v", o.cfg.Self, drain), func() bool {
				return o.c.Draining(contact) == drain && o.c.Status(contact) == R
			})
		}
	}
	var drains []bool
	for len(drains) < 2 {
		select {
		case v := <-nodes[0].verdicts:
			if v.Status == v.From {
				drains = append(drains, v.Draining)
			}
		case <-time.After(testTTL):
			t.Fatalf("drain verdicts %v, want [true false]", drains)
		}
	}
	if !drains[0] || drains[1] {
		t.Errorf("drain verdicts %v, want [true false]", drains)
	}
}
