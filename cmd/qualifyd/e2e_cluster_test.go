package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// Three `qualifyd run` processes clustered over loopback (embedded NATS,
// one file for all, each node's store= relative to its own working
// directory), probing one trunk on a SIP peer that drops the OPTIONS of
// chosen nodes (by source port: each node's --sip-bind), with the real
// Kamailio and a webhook receiver as sinks.

// clusterTTLs are the lab's member_ttl and lease_ttl, in seconds: the
// cluster package's own test figure.
const clusterTTLs = 3

// clusterTTL is clusterTTLs as a duration.
const clusterTTL = clusterTTLs * time.Second

// clusterFailOpen is the lab's sinks' failopen_after, in seconds: more
// than a failover can take (the daemon requires more than
// heartbeat_interval + lease_ttl + max(cluster.ElectionBound, lease_ttl):
// 1 + 3 + 19 s here).
const clusterFailOpen = 24

// clusterHeadroom is what a timing bound of the lab adds to the bound
// the design gives, for a loaded 2-core machine (six engineers' tests,
// the race detector): the tests log every measured figure, and the
// README gives the design's bound and the figures.
const clusterHeadroom = 2 * time.Second

// procNode is one `qualifyd run` of the lab.
type procNode struct {
	name     string
	sip      uint16
	http     string // base URL
	dir      string // its working directory (store=cluster is below)
	cmd      *exec.Cmd
	out      *peertest.Output
	killedAt time.Time
}

// changes is a webhook receiver that keeps every contact change in
// order, counts the heartbeats, and logs which node sent each body (by
// the socket it came on, when who is set).
type changes struct {
	mu     sync.Mutex
	to     []string // the contact's pushes: "up", "down"
	beats  int
	refuse bool                              // answer every body 503, delivering nothing
	who    func(remote, local string) string // the node that owns the peer socket, "" for unknown
	from   []pushed                          // every body, in the order received (refused ones too)
}

// pushed is one body the receiver got: when, and from which node.
type pushed struct {
	at   time.Time
	node string
}

// refusing makes the receiver answer every body 503 (or 200 again).
func (c *changes) refusing(refuse bool) {
	c.mu.Lock()
	c.refuse = refuse
	c.mu.Unlock()
}

func (c *changes) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	var p struct{ Kind, To string }
	if err := json.NewDecoder(req.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	node := ""
	if local, ok := req.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && c.who != nil {
		node = c.who(req.RemoteAddr, local.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.from = append(c.from, pushed{at, node})
	if c.refuse {
		http.Error(w, "refused by the test", http.StatusServiceUnavailable)
		return
	}
	switch p.Kind {
	case "contact":
		c.to = append(c.to, p.To)
	case "heartbeat":
		c.beats++
	}
}

// senders returns who sent each body so far.
func (c *changes) senders() []pushed {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pushed(nil), c.from...)
}

// pushes returns the contact's pushes so far.
func (c *changes) pushes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.to...)
}

// clusterProcs is the lab.
type clusterProcs struct {
	conf    string
	hookURL string // the webhook receiver's
	routes  string // nodes=
	trunk   *trunk
	k       *kamailio
	hook    *changes
	nodes   []*procNode
	drop    responder.Ports
	pids    sync.Map // pid -> node name, of every process started (sender)
}

// newClusterProcs starts the peer, Kamailio, the webhook receiver and the
// three nodes, and waits until the trunk is Reachable in the cluster and
// active in Kamailio, and the webhook has heard it up.
func newClusterProcs(t *testing.T) *clusterProcs {
	t.Helper()
	return newClusterProcsWith(t, clusterTTLs, clusterFailOpen)
}

// newClusterProcsWith is newClusterProcs with lease_ttl leaseTTL and
// the sinks' failopen_after failOpen, in seconds.
func newClusterProcsWith(t *testing.T, leaseTTL, failOpen int) *clusterProcs {
	t.Helper()
	l := &clusterProcs{hook: &changes{}, conf: filepath.Join(t.TempDir(), "qualifyd.conf")}
	l.hook.who = l.sender
	peer, err := responder.Listen("127.0.0.1:0", l.drop.Decide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	addr := peer.Addr().String()
	l.trunk = &trunk{name: "t", dest: "sip:" + addr, contact: "sip:t@" + addr}
	l.k = startKamailio(t, l.trunk)
	srv := httptest.NewServer(l.hook)
	t.Cleanup(srv.Close)
	var routes []string
	for i := range 3 {
		n := &procNode{name: string(rune('a' + i)), sip: uint16(freePort(t, "udp")),
			http: fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), dir: t.TempDir()}
		l.nodes = append(l.nodes, n)
		routes = append(routes, fmt.Sprintf("%s@127.0.0.1:%d", n.name, freePort(t, "tcp")))
	}
	l.hookURL, l.routes = srv.URL, strings.Join(routes, ",")
	l.writeConf(t, leaseTTL, failOpen)
	for _, n := range l.nodes {
		l.start(t, n)
	}
	for _, n := range l.nodes {
		eventually(t, 30*time.Second, n.name+" joined", func() bool { return n.logged("cluster: joined as " + n.name) })
	}
	// The leader logs the first verdict; a node that joins after it was
	// recorded reads it back and has no change to log.
	l.clusterSays(t, "Reachable", 30*time.Second, l.leader(t, nil))
	eventually(t, peerBound, "t active in Kamailio and up at the webhook", func() bool {
		return l.k.state(l.trunk.dest) == "A" && len(l.hook.pushes()) > 0
	})
	return l
}

// writeConf writes the lab's file with lease_ttl leaseTTL and the
// sinks' failopen_after failOpen, in seconds.
func (l *clusterProcs) writeConf(t *testing.T, leaseTTL, failOpen int) {
	t.Helper()
	writeFile(t, l.conf, fmt.Sprintf("[t]\ntype=aor\ncontact=%s\n%s\n"+
		"[edge]\ntype=sink\ndriver=kamailio\nurl=%s\naors=t\nresync_interval=2\nheartbeat_interval=1\nfailopen_after=%d\n\n"+
		"[hook]\ntype=sink\ndriver=webhook\nurl=%s\naors=t\nheartbeat_interval=1\nfailopen_after=%d\n\n"+
		"[c]\ntype=cluster\nnodes=%s\nstore=cluster\nmember_ttl=%d\nlease_ttl=%d\n",
		l.trunk.contact, liveOptions, l.k.rpc, failOpen, l.hookURL, failOpen, l.routes, clusterTTLs, leaseTTL))
}

// start runs node n (again) in its own directory.
func (l *clusterProcs) start(t *testing.T, n *procNode) {
	t.Helper()
	n.cmd = exec.Command(binary, "run", "--config", l.conf, "--node", n.name, "--sip-bind", fmt.Sprintf("127.0.0.1:%d", n.sip), "--http", n.http)
	n.cmd.Dir, n.out = n.dir, &peertest.Output{}
	n.cmd.Stdout, n.cmd.Stderr = n.out, os.Stderr
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.pids.Store(n.cmd.Process.Pid, n.name)
	cmd := n.cmd
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node %s printed:\n%s", n.name, n.out.String())
		}
	})
}

// kill sends SIGKILL to n and waits for it; killedAt is taken right
// before the signal, so that it is no later than the node's death.
func (n *procNode) kill(t *testing.T) {
	t.Helper()
	n.killedAt = time.Now()
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = n.cmd.Wait()
}

// logStamp is the stamp of a text log line, "[2006-01-02 15:04:05.000] ".
const logStamp = "[2006-01-02 15:04:05.000]"

// stamped returns the time n stamped on the first line it printed after
// its first from bytes that contains s; ok false for none yet. The
// stamp is the node's own record of when it logged the line, whenever
// the test reads it.
func (n *procNode) stamped(t *testing.T, from int, s string) (time.Time, bool) {
	t.Helper()
	out := n.out.String()
	if from > len(out) {
		return time.Time{}, false
	}
	for _, line := range strings.Split(out[from:], "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		if len(line) < len(logStamp) {
			t.Fatalf("node %s: line without a stamp: %q", n.name, line)
		}
		at, err := time.ParseInLocation(logStamp, line[:len(logStamp)], time.Local)
		if err != nil {
			t.Fatalf("node %s: %v", n.name, err)
		}
		return at, true
	}
	return time.Time{}, false
}

// waitStamped waits until n has printed a line containing s after its
// first from bytes, and returns its stamp.
func (n *procNode) waitStamped(t *testing.T, from int, s string) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, peerBound, n.name+" logs "+s, func() bool {
		var ok bool
		at, ok = n.stamped(t, from, s)
		return ok
	})
	return at
}

// logged reports whether n printed a line containing s.
func (n *procNode) logged(s string) bool { return strings.Contains(n.out.String(), s) }

// leads reports whether n's last leadership line says it leads.
func (n *procNode) leads() bool {
	out := n.out.String()
	return strings.LastIndex(out, "cluster: this node leads") > strings.LastIndex(out, "cluster: this node stopped leading")
}

// leader waits until one running node but skip leads, and returns it.
func (l *clusterProcs) leader(t *testing.T, skip *procNode) *procNode {
	t.Helper()
	var lead *procNode
	eventually(t, 30*time.Second, "a leader", func() bool {
		for _, n := range l.nodes {
			if n != skip && n.killedAt.IsZero() && n.leads() {
				lead = n
				return true
			}
		}
		return false
	})
	return lead
}

// setDrop drops (or answers again) the probes of nodes.
func (l *clusterProcs) setDrop(drop bool, nodes ...*procNode) {
	for _, n := range nodes {
		l.drop.Set(drop, n.sip)
	}
}

// verdictLine is the start of the log's line of the cluster's status.
func (l *clusterProcs) verdictLine(status string) string {
	return "qualifyd: cluster: Contact t/" + l.trunk.contact + " is now " + status + " ("
}

// clusterSays waits until each of nodes has logged the cluster's status
// of t as status after everything it logged before.
func (l *clusterProcs) clusterSays(t *testing.T, status string, bound time.Duration, nodes ...*procNode) {
	t.Helper()
	eventually(t, bound, "the cluster's status of t is "+status+" on every node", func() bool {
		for _, n := range nodes {
			out := n.out.String()
			i := strings.LastIndex(out, "qualifyd: cluster: Contact t/")
			if i < 0 || !strings.HasPrefix(out[i:], l.verdictLine(status)) {
				return false
			}
		}
		return true
	})
}

// trunk is the trunk's contact as n's API gives it (GET
// /api/v1/aors/t): this node's own status and the votes it counts.
func (n *procNode) trunk(t *testing.T) api.Contact {
	t.Helper()
	_, body := get(t, "GET", "http://"+n.http+"/api/v1/aors/t", "")
	var a api.AoR
	if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.Contacts) != 1 {
		t.Fatalf("GET /api/v1/aors/t on %s: %v: %s", n.name, err, body)
	}
	return a.Contacts[0]
}

// own is n's own status of t, from its API.
func (n *procNode) own(t *testing.T) string { return n.trunk(t).Status }

// unreachableVotes counts the votes Unreachable n's API shows for the
// trunk.
func (n *procNode) unreachableVotes(t *testing.T) int {
	count := 0
	for _, v := range n.trunk(t).Votes {
		if v.Status == "Unreachable" {
			count++
		}
	}
	return count
}

// downByTwo takes the lab to the trunk down by the vantage quorum: a's
// probes dropped (a alone says Unreachable: no push), then b's too
// (Kamailio inactive within one node's detection + 1 s).
func (l *clusterProcs) downByTwo(t *testing.T) {
	t.Helper()
	a, b := l.nodes[0], l.nodes[1]
	step(t, "1 a's probes dropped: a says Unreachable, the cluster Reachable, no push", func() {
		s := l.k.watch(l.trunk.dest)
		before := len(l.hook.pushes())
		l.setDrop(true, a)
		eventually(t, liveDetection+peerBound, "a's own status Unreachable", func() bool { return a.own(t) == "Unreachable" })
		eventually(t, peerBound, "a logs the disagreement", func() bool {
			return a.logged("qualifyd: cluster: vantages disagree on Contact t/" + l.trunk.contact + ": this node (a) says Unreachable, the cluster Reachable")
		})
		l.k.renewals(4) // the leader goes on renewing the heartbeat over 3 s
		s.end(t, l.trunk.dest, "A")
		// A leading edge in the window (a loaded host may lose a term)
		// re-asserts every object: an up, never a down.
		if got := l.hook.pushes()[before:]; slices.Contains(got, "down") {
			t.Fatalf("the webhook received %v while only a said Unreachable, want no down", got)
		} else if len(got) > 0 {
			t.Logf("the webhook received %v while only a said Unreachable: a new term's re-assertion", got)
		}
		for _, n := range l.nodes {
			if n.logged(l.verdictLine("Unreachable")) {
				t.Fatalf("node %s logged the cluster Unreachable with one vantage of three", n.name)
			}
		}
	})
	step(t, "2 b's probes dropped too: the cluster says Unreachable, Kamailio sets t inactive", func() {
		lead := l.leader(t, nil)
		from := len(lead.out.String())
		at := time.Now() // no later than the first probe b's peer drops
		l.setDrop(true, b)
		eventually(t, peerBound, "t inactive in Kamailio", func() bool { return l.k.state(l.trunk.dest) == "I" })
		// When Kamailio confirmed it, as the leader's sink logged it.
		took := lead.waitStamped(t, from, "qualifyd: sink edge: host "+strings.TrimPrefix(l.trunk.dest, "sip:")+" is now down in the router").Sub(at)
		t.Logf("t inactive in Kamailio %v after b's probes were dropped, as the leader %s logged it (one node's detection %v)", took, lead.name, liveDetection)
		if took > liveDetection+time.Second+clusterHeadroom {
			t.Fatalf("Kamailio confirmed t inactive %v after b's probes were dropped, want within one node's detection %v + 1 s (and %v of headroom)", took, liveDetection, clusterHeadroom)
		}
		l.clusterSays(t, "Unreachable", peerBound, l.nodes...)
		eventually(t, peerBound, "the webhook hears t down", func() bool {
			p := l.hook.pushes()
			return len(p) > 0 && p[len(p)-1] == "down"
		})
	})
}

// TestClusterVantagesDisagree: one vantage of three that cannot reach
// the trunk changes nothing in the routers; two of three take it down
// within one node's detection time + 1 s.
func TestClusterVantagesDisagree(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	l := newClusterProcs(t)
	l.downByTwo(t)
}

// TestClusterLeaderKilledWhileTrunkDown: kill -9 of the leader while
// the trunk is down (every vantage says so): another node leads,
// Kamailio never has the trunk active in between (sampled every 20 ms),
// and the webhook receives no "up".
func TestClusterLeaderKilledWhileTrunkDown(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	l := newClusterProcs(t)
	l.downByTwo(t)
	l.setDrop(true, l.nodes[2])
	eventually(t, liveDetection+peerBound, "c's own status Unreachable", func() bool { return l.nodes[2].own(t) == "Unreachable" })
	// Every node has counted every vote Unreachable before the kill: the
	// survivors then decide with two votes down. (A vote still on its way
	// when the leader dies leaves two live vantages that disagree; that
	// case is not this test's.)
	eventually(t, peerBound, "every node counts three votes Unreachable", func() bool {
		for _, n := range l.nodes {
			if n.unreachableVotes(t) != 3 {
				return false
			}
		}
		return true
	})
	old := l.leader(t, nil)
	s := l.k.watch(l.trunk.dest)
	before := len(l.hook.pushes())
	from := map[*procNode]int{}
	for _, n := range l.nodes {
		from[n] = len(n.out.String())
	}
	old.kill(t)
	next := l.leader(t, old)
	// The old lease lives the TTL after its last renewal, sent at most a
	// third of the TTL before the kill; the lease's stream is led by
	// another server than the holder's (TestLeaseHolderHandsItsStreamOn),
	// so no stream leader election comes first; a candidate that missed
	// the removal tries again a third of the TTL later
	// (TestLeaseOneLeaderThenFailover holds the servers' stamps to it).
	took := next.waitStamped(t, from[next], "cluster: this node leads").Sub(old.killedAt)
	t.Logf("leader %s killed; %s logged that it leads %v later (lease TTL %v)", old.name, next.name, took, clusterTTL)
	if took > clusterTTL+clusterTTL/3+clusterHeadroom {
		t.Errorf("the new leader logged that it leads %v after the kill, want within the lease TTL %v and a third, a campaign's retry (and %v of headroom)", took, clusterTTL, clusterHeadroom)
	}
	// Every survivor's API names the new leader at once on the leader,
	// and within a candidate's next campaign (a third of the TTL, which
	// reads the holder) on the others, whose watch of the lease may have
	// lost its consumer with the dead server.
	agreed, at := l.agreedLeader(t, old)
	agree := at.Sub(old.killedAt)
	t.Logf("the survivors' APIs agree that %s leads %v after the kill", agreed, agree)
	if agree > clusterTTL+2*clusterTTL/3+clusterHeadroom {
		t.Errorf("the survivors' APIs agree on a leader %v after the kill, want within the lease TTL %v and two thirds (and %v of headroom)", agree, clusterTTL, clusterHeadroom)
	}
	l.k.renewals(4) // the new leader's heartbeats, over 3 s
	s.end(t, l.trunk.dest, "I")
	for _, p := range l.hook.pushes()[before:] {
		if p != "down" {
			t.Fatalf("the webhook received %v after the failover, want no up", l.hook.pushes()[before:])
		}
	}
}

// TestClusterTwoOfThreeKilled: with two of three nodes killed, the
// survivor (the leader) has no JetStream quorum: it stops leading, says
// in its log that it lost the cluster and pushes nothing, and Kamailio
// fails open failopen_after after its last heartbeat; the survivor keeps
// probing.
func TestClusterTwoOfThreeKilled(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	l := newClusterProcs(t)
	l.downByTwo(t)
	survivor := l.leader(t, nil) // the hardest case: the leader survives
	own := survivor.own(t)
	for _, n := range l.nodes {
		if n != survivor {
			n.kill(t)
		}
	}
	killed := l.nodes[0].killedAt
	if survivor == l.nodes[0] {
		killed = l.nodes[1].killedAt
	}
	lost := survivor.waitStamped(t, 0, "cluster: this node lost the cluster (NATS, or its JetStream quorum): it probes and serves its own view and pushes nothing")
	t.Logf("the survivor %s logged the loss %v after the first kill", survivor.name, lost.Sub(killed))
	took := l.k.failedOpen(l.trunk.dest, killed, clusterFailOpen*time.Second)
	t.Logf("Kamailio failed open %v after two of three nodes were killed (failopen_after %ds)", took, clusterFailOpen)
	if now := survivor.own(t); now != own {
		t.Fatalf("the survivor's own status %s, want %s as before (it keeps probing)", now, own)
	}
	if survivor.leads() || !survivor.logged("cluster: this node stopped leading") {
		t.Fatal("the surviving leader did not stop leading without a JetStream quorum")
	}
	s := l.k.watch(l.trunk.dest)
	l.k.renewalsNone(t, survivor, 4)
	s.end(t, l.trunk.dest, "A")
}

// renewalsNone waits until n has sent probes over about count seconds
// (its qualifyd_sip_requests_total grew by count) and checks that
// nobody renewed Kamailio's heartbeat meanwhile.
func (k *kamailio) renewalsNone(t *testing.T, n *procNode, count int) {
	t.Helper()
	base := "http://" + n.http
	start := metric(t, base, "qualifyd_sip_requests_total")
	eventually(t, time.Duration(count+2)*time.Second+peerBound, "the survivor goes on probing", func() bool {
		return metric(t, base, "qualifyd_sip_requests_total") >= start+float64(count)
	})
	if v := k.heartbeat(); v != 0 {
		t.Fatalf("Kamailio's heartbeat item is %d, want none: nobody may renew it without a leader", v)
	}
}
