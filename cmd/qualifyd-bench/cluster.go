package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// clusterReport is what `qualifyd-bench cluster` measures: the cost of a
// node of a 3-node cluster against a single node in the same run (single,
// cluster, single again), the cluster's verdict latency on a flip of a
// tenth of the contacts, and a failover of the leader.
type clusterReport struct {
	Contacts   int     `json:"contacts"`
	FrequencyS float64 `json:"frequency_s"`
	DurationS  float64 `json:"duration_s"`
	Vantages   int     `json:"vantages"`
	// SingleContacts is the single node's contacts: as many as each node
	// of the cluster probes (contacts * vantages / nodes), so that both
	// probe at the same rate.
	SingleContacts int `json:"single_contacts"`
	// QuietS is from the cluster's first round (every vantage and the
	// leader logged each contact Reachable) to its stores' going quiet.
	QuietS float64 `json:"quiet_s"`
	// Single are the two single-node runs, before and after the cluster.
	Single []daemonReport `json:"single"`
	// Nodes are the cluster's nodes, measured in one window.
	Nodes    []clusterNodeCost `json:"nodes"`
	Flip     flipReport        `json:"flip"`
	Failover failoverReport    `json:"failover"`
	// Runs are every cluster run (--tls: one, or alternated off and on);
	// QuietS, Nodes, Flip and Failover above are the last one's.
	Runs []clusterRunReport `json:"runs"`
	// TLS is the TLS runs' figures over those in clear, when both ran.
	TLS *tlsRatio `json:"tls_ratio,omitempty"`
}

// clusterNodeCost is one node's cost and its ratios to the singles' mean.
type clusterNodeCost struct {
	Name     string       `json:"name"`
	Leader   bool         `json:"leader"`
	Cost     daemonReport `json:"cost"`
	CPURatio float64      `json:"cpu_per_probe_ratio"`
	RSSRatio float64      `json:"rss_per_contact_ratio"`
}

// flipReport is the verdict latency: per flipped contact, from the
// second vantage's own Unreachable line to the leader's cluster line.
type flipReport struct {
	Contacts int     `json:"contacts"`
	Paired   int     `json:"paired"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	MinMs    float64 `json:"min_ms"`
	// SpreadS is from the flip to the leader's last cluster line.
	SpreadS float64 `json:"spread_s"`
}

// failoverReport is the kill -9 of the leader, timed from the kill.
type failoverReport struct {
	LeaseTTLS  float64 `json:"lease_ttl_s"`
	MemberTTLS float64 `json:"member_ttl_s"`
	OldLeader  string  `json:"old_leader"`
	NewLeader  string  `json:"new_leader"`
	LeaderS    float64 `json:"new_leader_s"`
	// LeaderFrom says how LeaderS was read: the survivors' API, or the
	// new leader's log line for a qualifyd without /api/v1/cluster.
	LeaderFrom    string  `json:"new_leader_from"`
	FirstPushS    float64 `json:"first_push_s"`
	FirstChangeS  float64 `json:"first_change_s"`
	Changes       int     `json:"changes"`
	Changed       int     `json:"changed"`
	Heartbeats    int     `json:"heartbeats"`
	HookObjects   int     `json:"hook_objects"`
	HookHeldDown  int     `json:"hook_held_down"`
	HookWantsDown int     `json:"hook_wants_down"`
}

// clusterOpts are the flags of `qualifyd-bench cluster`.
type clusterOpts struct {
	daemonOpts
	vantages  int
	hookAoRs  int
	leaseTTL  int
	memberTTL int
	settle    time.Duration
	tls       string // off, on or alternate
	rounds    int    // pairs of runs off and on with tls=alternate
}

// Sockets of the responder: contacts i%20 in {18, 19} are on the flip
// sockets, a tenth of them.
const (
	clusterLive = 18
	clusterFlip = 2
)

// clusterNodes are the nodes' names.
var clusterNodes = []string{"a", "b", "c"}

// runCluster is `qualifyd-bench cluster`.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o clusterOpts
	fs.StringVar(&o.bin, "qualifyd", "bin/qualifyd", "the qualifyd binary to run")
	fs.IntVar(&o.contacts, "contacts", 100_000, "number of contacts (one AoR each)")
	fs.IntVar(&o.vantages, "vantages", 2, "vantages of the cluster: how many of the 3 nodes probe each contact")
	fs.DurationVar(&o.freq, "frequency", 10*time.Second, "qualify_frequency of every contact (whole seconds)")
	fs.DurationVar(&o.dur, "duration", 30*time.Second, "measured cost window, once every vantage has logged its first round, the leader every verdict, and the stores are quiet")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "qualify_timeout")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "wait after the first round before the cost window")
	fs.IntVar(&o.hookAoRs, "hook-aors", 1000, "AoRs the webhook sink follows (the first ones)")
	fs.IntVar(&o.leaseTTL, "lease-ttl", 6, "lease_ttl of the cluster, seconds")
	fs.IntVar(&o.memberTTL, "member-ttl", 6, "member_ttl of the cluster, seconds")
	fs.StringVar(&o.tls, "tls", "off", "the cluster's routes: off (in clear on loopback), on (mutual TLS and the secret), or alternate (off, on, --rounds times)")
	fs.IntVar(&o.rounds, "rounds", 1, "with --tls alternate, how many pairs of cluster runs (off, on)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.contacts < clusterLive+clusterFlip || o.freq < time.Second || o.freq%time.Second != 0 || o.vantages < 1 || o.vantages > len(clusterNodes) {
		fmt.Fprintf(stderr, "qualifyd-bench cluster: want at least 20 contacts, a frequency of whole seconds and 1 to %d vantages\n", len(clusterNodes))
		return 2
	}
	o.hookAoRs = min(o.hookAoRs, o.contacts)
	modes, err := clusterModes(o.tls, o.rounds)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench cluster:", err)
		return 2
	}
	rep, err := benchCluster(ctx, o, modes)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench cluster:", err)
		return 1
	}
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	printCluster(stdout, rep)
	return 0
}

// clusterRun is the shared state of one benchmark run.
type clusterRun struct {
	o    clusterOpts
	dir  string
	pop  *population // the cluster's contacts
	solo *population // the single node's: as many as a node of the cluster probes
	resp *child
	hook *hookReceiver
	rep  clusterReport
	tls  bool // the cluster run's routes use TLS
	run  int  // the cluster run, from 1: each has stores of its own
}

// benchCluster runs single, cluster (cost, flip, failover) once per
// mode (TLS off or on), single.
func benchCluster(ctx context.Context, o clusterOpts, modes []bool) (clusterReport, error) {
	r := &clusterRun{o: o, rep: clusterReport{Contacts: o.contacts, FrequencyS: o.freq.Seconds(), DurationS: o.dur.Seconds(),
		Vantages: o.vantages, SingleContacts: perNode(o.contacts, o.vantages)}}
	var err error
	if r.resp, err = spawnResponder(ctx, "--live", fmt.Sprint(clusterLive), "--flip", fmt.Sprint(clusterFlip)); err != nil {
		return r.rep, err
	}
	defer r.resp.stop()
	r.pop = &population{n: o.contacts, live: slices.Concat(r.resp.ports.Live, r.resp.ports.Flip)}
	r.solo = &population{n: r.rep.SingleContacts, live: r.pop.live}
	if r.hook, err = startHookReceiver(); err != nil {
		return r.rep, err
	}
	defer r.hook.close()
	if r.dir, err = os.MkdirTemp("", "qualifyd-bench-cluster"); err != nil {
		return r.rep, err
	}
	defer os.RemoveAll(r.dir)
	steps := []func(context.Context) error{r.single}
	for _, tls := range modes {
		steps = append(steps, r.clusterAs(tls))
	}
	for _, step := range append(steps, r.single) {
		if err := step(ctx); err != nil {
			return r.rep, err
		}
	}
	r.ratios()
	return r.rep, nil
}

// perNode is how many of contacts each of the nodes probes with
// vantages of them per contact, rounded.
func perNode(contacts, vantages int) int {
	return (contacts*vantages + len(clusterNodes)/2) / len(clusterNodes)
}

// isFlipped is whether contact i is on a flip socket.
func isFlipped(i int) bool { return i%(clusterLive+clusterFlip) >= clusterLive }

// flipped counts the flipped contacts among the first n.
func flipped(n int) int {
	k := 0
	for i := range n {
		k += btoi(isFlipped(i))
	}
	return k
}

// writeNodeConfig writes the AoRs of pop, the webhook sink posting to
// /hook/NAME and, for a cluster node, the cluster section.
func (r *clusterRun) writeNodeConfig(name string, pop *population, clusterSection string) (string, error) {
	path := filepath.Join(r.dir, name+".conf")
	if _, err := writeConfig(path, pop, r.o.daemonOpts); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	names := make([]string, min(r.o.hookAoRs, pop.n))
	for i := range names {
		names[i] = "c" + fmt.Sprint(i)
	}
	fmt.Fprintf(f, "[hook]\ntype=sink\ndriver=webhook\nurl=%s%s\naors=%s\n\n%s", r.hook.base, name, strings.Join(names, ","), clusterSection)
	return path, f.Close()
}

// single runs one node without a cluster and measures its cost.
func (r *clusterRun) single(ctx context.Context) error {
	conf, err := r.writeNodeConfig("single", r.solo, "")
	if err != nil {
		return err
	}
	lg := newNodeLog()
	d, err := startDaemonLog(ctx, r.o.bin, conf, lg)
	if err != nil {
		return err
	}
	defer d.stop()
	if _, err := d.waitReady(ctx); err != nil {
		return err
	}
	if err := r.awaitFirstRound(ctx, []*nodeLog{lg}, nil, r.solo.n); err != nil {
		return fmt.Errorf("single: %w", err)
	}
	if !sleepCtx(ctx, r.o.settle) {
		return ctx.Err()
	}
	rep := daemonReport{Contacts: r.solo.n, FrequencyS: r.o.freq.Seconds(), DurationS: r.o.dur.Seconds(), GOGC: os.Getenv("GOGC")}
	if err := d.window(ctx, r.o.dur, &rep); err != nil {
		return err
	}
	rep.RSSBytes = procStatusOf(d.pid(), "VmRSS:")
	rep.RSSPerContact = float64(rep.RSSBytes) / float64(r.solo.n)
	r.rep.Single = append(r.rep.Single, rep)
	return nil
}

// awaitFirstRound waits until the nodes have logged n contacts Reachable
// once per vantage (each node logs only the contacts it probes), and the
// leader (if any) the cluster's verdict of each.
func (r *clusterRun) awaitFirstRound(ctx context.Context, logs []*nodeLog, leader *nodeLog, n int) error {
	own := n
	if leader != nil {
		own = n * r.o.vantages
	}
	bound := r.o.freq + 3*time.Minute
	err := pollUntil(ctx, bound, func() bool {
		up := 0
		for _, l := range logs {
			u, _, _, _ := l.counts()
			up += u
		}
		if up < own || leader == nil {
			return up >= own
		}
		_, cup, _, _ := leader.counts()
		return cup >= n
	})
	if err != nil {
		return fmt.Errorf("first round of %d contacts not logged within %v", n, bound)
	}
	return nil
}

// pollUntil polls ok every 20 ms until it holds, bound passes (an
// error) or ctx ends.
func pollUntil(ctx context.Context, bound time.Duration, ok func() bool) error {
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", bound)
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// clusterNode is one running node of the cluster.
type clusterNode struct {
	name string
	d    *daemonChild
	log  *nodeLog
}

// errNoClusterRoute is a qualifyd whose HTTP API has no /api/v1/cluster.
var errNoClusterRoute = errors.New("/api/v1/cluster: 404")

// view reads the node's GET /api/v1/cluster.
func (n *clusterNode) view() (api.Cluster, error) {
	var v api.Cluster
	c := http.Client{Timeout: time.Second}
	res, err := c.Get(n.d.base + "/api/v1/cluster")
	if err != nil {
		return v, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return v, errNoClusterRoute
	}
	if res.StatusCode != http.StatusOK {
		return v, fmt.Errorf("/api/v1/cluster: %s", res.Status)
	}
	return v, json.NewDecoder(res.Body).Decode(&v)
}

// cluster starts the three nodes, measures their cost, flips a tenth of
// the contacts and kills the leader.
func (r *clusterRun) cluster(ctx context.Context) error {
	nodes, err := r.startNodes(ctx)
	defer func() {
		for _, n := range nodes {
			n.d.stop()
		}
	}()
	if err != nil {
		return err
	}
	lead, err := awaitLeader(ctx, nodes)
	if err != nil {
		return err
	}
	logs := make([]*nodeLog, len(nodes))
	for i, n := range nodes {
		logs[i] = n.log
	}
	if err := r.awaitFirstRound(ctx, logs, lead.log, r.o.contacts); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	round := time.Now()
	if err := r.awaitStoresQuiet(ctx); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	r.rep.QuietS = time.Since(round).Seconds()
	if !sleepCtx(ctx, r.o.settle) {
		return ctx.Err()
	}
	if err := r.clusterCost(ctx, nodes, lead); err != nil {
		return err
	}
	if err := r.flip(ctx, nodes, lead); err != nil {
		return err
	}
	if err := r.failover(ctx, nodes, lead); err != nil {
		return err
	}
	return r.resp.flip(false)
}

// startNodes writes each node's configuration (its own store) and starts
// the three, each with --node.
func (r *clusterRun) startNodes(ctx context.Context) ([]*clusterNode, error) {
	var routes []string
	for _, name := range clusterNodes {
		port, err := freeTCPPort()
		if err != nil {
			return nil, err
		}
		routes = append(routes, fmt.Sprintf("%s@127.0.0.1:%d", name, port))
	}
	tlsOpts, err := r.tlsOptions()
	if err != nil {
		return nil, err
	}
	var nodes []*clusterNode
	for _, name := range clusterNodes {
		sec := fmt.Sprintf("[cluster]\ntype=cluster\nnodes=%s\nvantages=%d\nstore=%s\nlease_ttl=%d\nmember_ttl=%d\n%s",
			strings.Join(routes, ","), r.o.vantages, r.store(name), r.o.leaseTTL, r.o.memberTTL, tlsOpts)
		conf, err := r.writeNodeConfig(name, r.pop, sec)
		if err != nil {
			return nodes, err
		}
		n := &clusterNode{name: name, log: newNodeLog()}
		if n.d, err = startDaemonLog(ctx, r.o.bin, conf, n.log, "--node", name); err != nil {
			return nodes, err
		}
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		if _, err := n.d.waitReady(ctx); err != nil {
			return nodes, fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	return nodes, nil
}

// freeTCPPort returns a loopback TCP port that was free a moment ago.
func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// awaitLeader waits until one of nodes says it leads and every node
// agrees, with every member up.
func awaitLeader(ctx context.Context, nodes []*clusterNode) (*clusterNode, error) {
	var lead *clusterNode
	err := pollUntil(ctx, time.Minute, func() bool {
		lead = agreedLeader(nodes)
		return lead != nil
	})
	if err != nil {
		var seen []string
		for _, n := range nodes {
			v, verr := n.view()
			seen = append(seen, fmt.Sprintf("%s: %+v %v", n.name, v, verr))
		}
		return nil, fmt.Errorf("no agreed leader: %w (views: %s)", err, strings.Join(seen, "; "))
	}
	return lead, nil
}

// agreedLeader is the node that leads when every one of nodes names it
// and sees len(nodes) members up (GET /api/v1/cluster); nil otherwise.
// Against a qualifyd without that route (404) it is the one node whose
// log's last leadership line says it leads.
func agreedLeader(nodes []*clusterNode) *clusterNode {
	var lead *clusterNode
	for _, n := range nodes {
		v, err := n.view()
		if errors.Is(err, errNoClusterRoute) {
			return loggedLeader(nodes)
		}
		if err != nil || !v.InCluster || v.Leader == "" || upMembers(v) < len(nodes) {
			return nil
		}
		if v.Leading {
			lead = n
		}
		if i := slices.IndexFunc(nodes, func(m *clusterNode) bool { return m.name == v.Leader }); i < 0 || (lead != nil && lead.name != v.Leader) {
			return nil
		}
	}
	return lead
}

// loggedLeader is the one node of nodes whose log says it leads; nil for
// none or several.
func loggedLeader(nodes []*clusterNode) *clusterNode {
	var lead *clusterNode
	for _, n := range nodes {
		if ok, _ := n.log.leads(); ok {
			if lead != nil {
				return nil
			}
			lead = n
		}
	}
	return lead
}

func upMembers(v api.Cluster) int {
	up := 0
	for _, m := range v.Members {
		up += btoi(m.Up)
	}
	return up
}

// clusterCost measures every node in one window, concurrently.
func (r *clusterRun) clusterCost(ctx context.Context, nodes []*clusterNode, lead *clusterNode) error {
	costs := make([]clusterNodeCost, len(nodes))
	errs := make(chan error, len(nodes))
	for i, n := range nodes {
		costs[i] = clusterNodeCost{Name: n.name, Leader: n == lead, Cost: daemonReport{Contacts: r.o.contacts,
			FrequencyS: r.o.freq.Seconds(), DurationS: r.o.dur.Seconds(), GOGC: os.Getenv("GOGC")}}
		go func() { errs <- n.d.window(ctx, r.o.dur, &costs[i].Cost) }()
	}
	for range nodes {
		if err := <-errs; err != nil {
			return err
		}
	}
	for i, n := range nodes {
		c := &costs[i].Cost
		c.RSSBytes = procStatusOf(n.d.pid(), "VmRSS:")
		c.RSSPerContact = float64(c.RSSBytes) / float64(r.o.contacts)
	}
	r.rep.Nodes = costs
	return nil
}

// ratios sets each node's ratios to the mean of the single runs.
func (r *clusterRun) ratios() {
	var cpu, rss float64
	for _, s := range r.rep.Single {
		cpu += s.CPUUsPerProbe / float64(len(r.rep.Single))
		rss += s.RSSPerContact / float64(len(r.rep.Single))
	}
	for _, nodes := range append([][]clusterNodeCost{r.rep.Nodes}, runNodes(r.rep.Runs)...) {
		for i := range nodes {
			n := &nodes[i]
			n.CPURatio, n.RSSRatio = n.Cost.CPUUsPerProbe/cpu, n.Cost.RSSPerContact/rss
		}
	}
	r.rep.TLS = tlsRatios(r.rep.Runs)
}

// runNodes are the runs' nodes.
func runNodes(runs []clusterRunReport) [][]clusterNodeCost {
	out := make([][]clusterNodeCost, len(runs))
	for i := range runs {
		out[i] = runs[i].Nodes
	}
	return out
}
