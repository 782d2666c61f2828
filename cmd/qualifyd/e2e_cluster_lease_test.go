package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// The lease's hand-offs through real processes: which node leads, as
// every node's API says, against which node's bodies reach the webhook
// receiver (told apart by the socket each came on).

// sender is the name of the lab's node whose process owns the TCP
// socket from remote to local (the receiver's peer and its own address,
// host:port each), "" when none does.
func (l *clusterProcs) sender(remote, local string) string {
	_, from, err := splitPort(remote)
	if err != nil {
		return ""
	}
	_, to, err := splitPort(local)
	if err != nil {
		return ""
	}
	inode := socketInode(from, to)
	if inode == "" {
		return ""
	}
	name := ""
	l.pids.Range(func(pid, node any) bool {
		if ownsSocket(pid.(int), inode) {
			name = node.(string)
			return false
		}
		return true
	})
	return name
}

// splitPort is host:port's port.
func splitPort(hostport string) (string, int, error) {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("%q: no port", hostport)
	}
	p, err := strconv.Atoi(hostport[i+1:])
	return hostport[:i], p, err
}

// socketInode is the inode of the open TCP socket from local port from
// to remote port to, from /proc/net/tcp and tcp6 ("" for none). Both
// ports are matched: one local port may serve several connections (to
// other remotes, or closed ones in TIME_WAIT, whose inode is 0), of
// other processes than the sender.
func socketInode(from, to int) string {
	local, remote := fmt.Sprintf(":%04X", from), fmt.Sprintf(":%04X", to)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 9 && strings.HasSuffix(fields[1], local) && strings.HasSuffix(fields[2], remote) && fields[9] != "0" {
				return fields[9]
			}
		}
	}
	return ""
}

// ownsSocket reports whether process pid has the socket of inode open.
func ownsSocket(pid int, inode string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}

// view is n's GET /api/v1/cluster; ok false when it does not answer (a
// node stopped, paused or restarting).
func (n *procNode) view() (api.Cluster, bool) {
	c := httpClient()
	resp, err := c.Get("http://" + n.http + "/api/v1/cluster")
	if err != nil {
		return api.Cluster{}, false
	}
	defer resp.Body.Close()
	var v api.Cluster
	return v, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil
}

// httpClient is a client whose requests give up after a second: a
// paused node must not hold the poll.
func httpClient() *http.Client { return &http.Client{Timeout: time.Second} }

// span is a stretch of time a node's API said it leads: its first and
// last samples saying so, in a row.
type span struct {
	node        string
	first, last time.Time
}

// leaderLog samples every node's API every 50 ms until stopped.
type leaderLog struct {
	mu    sync.Mutex
	spans []span
	open  map[string]int // node -> index of its open span
	stop  chan struct{}
	done  chan struct{}
}

// pollLeaders starts sampling the lab's APIs, each node on its own so
// that one that does not answer (paused) does not slow the others'.
func (l *clusterProcs) pollLeaders() *leaderLog {
	g := &leaderLog{open: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, n := range l.nodes {
		wg.Go(func() { g.follow(n) })
	}
	go func() { wg.Wait(); close(g.done) }()
	return g
}

// follow samples n's API every 50 ms until the log is stopped.
func (g *leaderLog) follow(n *procNode) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
		v, ok := n.view()
		g.sample(n.name, time.Now(), ok && v.Leading)
	}
}

// sample records that node led (or not) at at.
func (g *leaderLog) sample(node string, at time.Time, leading bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i, open := g.open[node]
	switch {
	case leading && open:
		g.spans[i].last = at
	case leading:
		g.open[node] = len(g.spans)
		g.spans = append(g.spans, span{node, at, at})
	case open:
		delete(g.open, node)
	}
}

// end stops the sampling and returns the spans.
func (g *leaderLog) end() []span {
	close(g.stop)
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]span(nil), g.spans...)
}

// checkOneLeader fails the test when two nodes' spans overlap (both
// said they lead at once), or when a body reached the receiver from a
// node while another node's span held it.
func checkOneLeader(t *testing.T, spans []span, bodies []pushed) {
	t.Helper()
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.node != b.node && !a.last.Before(b.first) && !b.last.Before(a.first) {
				t.Errorf("two leaders: %s led %s to %s, %s led %s to %s", a.node, a.first.Format(logStamp), a.last.Format(logStamp), b.node, b.first.Format(logStamp), b.last.Format(logStamp))
			}
		}
	}
	for _, p := range bodies {
		if p.node == "" {
			t.Errorf("a body at %s came from no node of the lab", p.at.Format(logStamp))
		}
		for _, s := range spans {
			if s.node != p.node && s.first.Before(p.at) && p.at.Before(s.last) {
				t.Errorf("%s pushed at %s while %s led (%s to %s)", p.node, p.at.Format(logStamp), s.node, s.first.Format(logStamp), s.last.Format(logStamp))
			}
		}
	}
}

// restart stops n with SIGTERM (its lease released, nothing pushed),
// starts it again and waits until it joined.
func (l *clusterProcs) restart(t *testing.T, n *procNode) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = n.cmd.Wait()
	l.start(t, n)
	eventually(t, 30*time.Second, n.name+" joined again", func() bool { return n.logged("cluster: joined as " + n.name) })
}

// TestClusterLeaseTTLRaisedOnRestart: every node restarted in turn with
// lease_ttl raised from 6 to 30: at no moment do two nodes lead, by
// every node's API sampled every 50 ms and by the node each body of the
// webhook came from, through the mixed terms and for a 30 s term after
// the last restart (a holder that believed 20 s of a key that dies after
// 6 s would share it with a second leader from the 6th second).
func TestClusterLeaseTTLRaisedOnRestart(t *testing.T) {
	t.Parallel() // it watches a 30 s term: beside the other parallel tests
	const before, after = 6, 30
	l := newClusterProcsWith(t, before, 3*after) // failopen_after above 2 x either lease_ttl
	log := l.pollLeaders()
	mark := len(l.hook.senders())
	l.writeConf(t, after, 3*after)
	for _, n := range l.nodes {
		l.restart(t, n)
	}
	const raised = "cluster: bucket qualifyd_lease: TTL updated from 6s to the file's lease_ttl 30s"
	eventually(t, after*time.Second, "a holder raises the lease bucket's TTL", func() bool {
		for _, n := range l.nodes {
			if n.logged(raised) {
				return true
			}
		}
		return false
	})
	lead := l.leader(t, nil)
	t.Logf("the bucket's TTL raised; %s leads after the restarts", lead.name)
	time.Sleep(after * time.Second) // a whole term of the last leader: a key dying at 6 s would show a second one
	spans := log.end()
	checkOneLeader(t, spans, l.hook.senders()[mark:])
	t.Logf("%d spans of leadership over the restarts, %d bodies at the webhook", len(spans), len(l.hook.senders())-mark)
	if len(l.hook.senders()) == mark {
		t.Fatal("no body reached the webhook over the restarts")
	}
}

// TestClusterPausedLeaderPushesNothing: the leader paused (SIGSTOP) past
// its lease, another node leads, and the paused one resumes (SIGCONT):
// it pushes nothing, heartbeat or change, as the webhook's senders show,
// and its API does not say it leads.
func TestClusterPausedLeaderPushesNothing(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	l := newClusterProcs(t)
	log := l.pollLeaders()
	old := l.leader(t, nil)
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = old.cmd.Process.Signal(syscall.SIGCONT) })
	var next *procNode
	eventually(t, 30*time.Second, "another node leads", func() bool {
		for _, n := range l.nodes {
			if n == old {
				continue // it does not answer while paused
			}
			if v, ok := n.view(); ok && v.Leading {
				next = n
				return true
			}
		}
		return false
	})
	t.Logf("%s paused; %s leads %v later (lease_ttl %v)", old.name, next.name, time.Since(stopped), clusterTTL)
	time.Sleep(time.Until(stopped.Add(2 * clusterTTL))) // well past the paused lease's deadline (2/3 of the TTL after its last renewal)
	mark := len(l.hook.senders())
	resumed := time.Now()
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, peerBound, old.name+" answers again", func() bool { _, ok := old.view(); return ok })
	time.Sleep(3 * time.Second) // three of its heartbeat intervals
	spans := log.end()
	for _, p := range l.hook.senders()[mark:] {
		if p.node == "" {
			t.Errorf("a body at %s came from no node of the lab", p.at.Format(logStamp))
		}
		if p.node == old.name {
			t.Errorf("%s pushed at %s, %v after it resumed, while %s led", old.name, p.at.Format(logStamp), p.at.Sub(resumed), next.name)
		}
	}
	for _, s := range spans {
		if s.node == old.name && s.last.After(resumed) {
			t.Errorf("%s's API said it leads at %s, after it resumed", old.name, s.last.Format(logStamp))
		}
	}
	checkOneLeader(t, spans, nil)
	if len(l.hook.senders()) == mark {
		t.Fatalf("no body reached the webhook after %s resumed: the new leader %s should beat", old.name, next.name)
	}
}

// agreedLeader waits until every running node but gone answers its API
// with the same leader, one of them, which says it leads, and returns
// that leader's name and when they agreed.
func (l *clusterProcs) agreedLeader(t *testing.T, gone *procNode) (string, time.Time) {
	t.Helper()
	leader := ""
	eventually(t, 60*time.Second, "the survivors' APIs agree on a leader", func() bool {
		leader = ""
		for _, n := range l.nodes {
			if n == gone {
				continue
			}
			v, ok := n.view()
			if !ok || v.Leader == "" || v.Leader == gone.name || (leader != "" && v.Leader != leader) || (v.Leader == n.name) != v.Leading {
				return false
			}
			leader = v.Leader
		}
		return true
	})
	return leader, time.Now()
}
