package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// testTTL is the member and lease TTL of the real-server tests.
const testTTL = 3 * time.Second

// edge is one call of the Leading hook, with its time.
type edge struct {
	leading bool
	at      time.Time
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

// freePorts returns n route addresses on loopback that were free.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// testConfigs returns the configuration of each of n nodes named a, b,
// c..., on loopback, each with its own store.
func testConfigs(t *testing.T, n int, q Quorum) []Config {
	t.Helper()
	routes := freePorts(t, n)
	var nodes []Node
	for i, r := range routes {
		nodes = append(nodes, Node{Name: string(rune('a' + i)), Route: r})
	}
	var cfgs []Config
	for _, nd := range nodes {
		c := Config{Nodes: nodes, Quorum: q, Store: t.TempDir(), MemberTTL: testTTL, LeaseTTL: testTTL}
		if err := c.Finish(nd.Name); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, c)
	}
	return cfgs
}

// startNode starts one node and stops it at the test's end.
func startNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	n := &testNode{cfg: cfg, done: make(chan struct{}), verdicts: make(chan Verdict, 1024)}
	hooks := Hooks{
		Leading: func(l bool) {
			n.mu.Lock()
			n.edges = append(n.edges, edge{l, time.Now()})
			n.mu.Unlock()
		},
		Verdict: func(v Verdict) { n.verdicts <- v },
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
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
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

// killServer stops a node's embedded server without letting its Run
// clean up: the node loses NATS as a crashed host's peers see it.
func (n *testNode) killServer() { n.c.srv.Shutdown() }

func TestMembershipSeesThreeThenTwo(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	v := nodes[0].c.View()
	if !v.InCluster || v.Self != "a" || len(v.Members) != 3 {
		t.Fatalf("view %+v", v)
	}
	nodes[2].killServer()
	killed := time.Now()
	took := waitFor(t, 2*testTTL, "a sees c leave", func() bool { return upCount(nodes[0].c.View()) == 2 })
	t.Logf("c left a's view %v after its server died (member TTL %v)", took, testTTL)
	if took > testTTL+testTTL/3 {
		t.Errorf("c left after %v, want within the TTL %v (and the marker's delivery)", took, testTTL)
	}
	for _, m := range nodes[0].c.View().Members {
		if m.Name == "c" && (m.Up || m.Since.Before(killed)) {
			t.Errorf("c: %+v, want down since after %v", m, killed)
		}
	}
	waitFor(t, 2*testTTL, "c knows it is out", func() bool { return !nodes[2].c.View().InCluster })
}
