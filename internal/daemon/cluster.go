package daemon

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// ClusterConfig reads conf's type=cluster section for the node named
// node (--node; "" means this host's short name, which must then be one
// of the nodes): each option through cluster.Config.Set, then Finish,
// every error at its file:line. It returns ok false, and no error, for a
// configuration without a cluster section, where node must be "".
func ClusterConfig(conf *pjsip.Config, node string) (cfg cluster.Config, ok bool, err error) {
	sec := conf.Cluster
	if sec == nil {
		if node != "" {
			return cfg, false, fmt.Errorf("--node %s: the configuration has no type=cluster section (a single node has no name)", node)
		}
		return cfg, false, nil
	}
	if cfg, err = setCluster(sec); err != nil {
		return cfg, false, err
	}
	if node == "" {
		node = shortHostname()
	}
	return cfg, true, finishCluster(conf, &cfg, node)
}

// CheckCluster reads conf's cluster section as ClusterConfig does, for
// the node this host runs (its short host name, as run takes it without
// --node) when that is one of nodes=, else for the first node: the files
// the options name with {node} are this host's own; ok false without a
// section.
func CheckCluster(conf *pjsip.Config) (cfg cluster.Config, ok bool, err error) {
	sec := conf.Cluster
	if sec == nil {
		return cfg, false, nil
	}
	if cfg, err = setCluster(sec); err != nil {
		return cfg, false, err
	}
	self := shortHostname()
	if !slices.ContainsFunc(cfg.Nodes, func(n cluster.Node) bool { return n.Name == self }) {
		self = ""
		if len(cfg.Nodes) > 0 {
			self = cfg.Nodes[0].Name
		}
	}
	return cfg, true, finishCluster(conf, &cfg, self)
}

// setCluster applies each option of sec.
func setCluster(sec *pjsip.Cluster) (cluster.Config, error) {
	var cfg cluster.Config
	for _, o := range sec.Options {
		if err := cfg.Set(o.Key, o.Value); err != nil {
			return cfg, sec.OptionError(o, err, cluster.ErrUnknownOption)
		}
	}
	return cfg, nil
}

// ClusterWarnings are cfg's warnings (cluster.Config.Warnings) at the
// file:line of conf's cluster section: check-config prints them and the
// daemon logs them at every start.
func ClusterWarnings(conf *pjsip.Config, cfg cluster.Config) []error {
	var out []error
	for _, w := range cfg.Warnings() {
		out = append(out, &pjsip.Error{File: conf.Cluster.File, Line: conf.Cluster.Line, Section: conf.Cluster.Name, Err: errors.New(w)})
	}
	return out
}

// finishCluster finishes cfg for node and refuses a sink whose router
// would fail open during a failover.
func finishCluster(conf *pjsip.Config, cfg *cluster.Config, node string) error {
	if err := cfg.Finish(node); err != nil {
		return conf.Cluster.SectionError(err, cluster.ErrUnknownOption)
	}
	if err := checkFiles(conf.Cluster, cfg); err != nil {
		return err
	}
	return checkFailover(conf.Sinks, cfg.LeaseTTL)
}

// checkFiles reads the files the section's options name, each error at
// the line of the option naming the file.
func checkFiles(sec *pjsip.Cluster, cfg *cluster.Config) error {
	_, err := cfg.CheckFiles(time.Now())
	return fileError(sec, err)
}

// fileError places a *cluster.FileError at its option's line, another
// error at the section's.
func fileError(sec *pjsip.Cluster, err error) error {
	fe, ok := errors.AsType[*cluster.FileError](err)
	if !ok {
		if err != nil {
			return sec.SectionError(err, cluster.ErrUnknownOption)
		}
		return nil
	}
	for _, o := range sec.Options {
		if o.Key == fe.Option {
			return sec.OptionError(o, fe, cluster.ErrUnknownOption)
		}
	}
	return sec.SectionError(fe, cluster.ErrUnknownOption)
}

// checkFailover refuses a sink whose failopen_after is no longer than a
// failover of the leader can leave its router without a heartbeat, with
// a margin. The leader's last beat came up to heartbeat_interval before
// it died. The next leader takes the lease once the key has expired
// (lease_ttl after the dead leader's last renewal) and, when the dead
// node's server led the lease bucket's stream (the leader hands its
// streams on at each renewal, but one elected since is its own until
// the next), once JetStream has elected that stream's leader
// (cluster.ElectionBound after the death at most): max(ElectionBound,
// lease_ttl) after the death, and a campaign's attempt and retry (5/12
// x lease_ttl) later. One more lease_ttl covers that and leaves 7/12 x
// lease_ttl to spare for a loaded host. So failopen_after must exceed
// heartbeat_interval + lease_ttl + max(ElectionBound, lease_ttl), or
// the router would route every destination in the middle of a failover
// (README: a failover of the leader flips no route).
func checkFailover(sinks []*pjsip.Sink, lease time.Duration) error {
	gap := cluster.FailoverGap(lease)
	election := gap - lease // for the message
	for _, s := range sinks {
		if need := s.HeartbeatInterval + gap; s.HeartbeatInterval > 0 && s.FailOpenAfter <= need {
			return &pjsip.Error{File: s.File, Line: s.Line, Section: s.Name, Option: "failopen_after",
				Err: fmt.Errorf("%w: %v s is no longer than a failover of the leader can leave the router without a heartbeat, with a margin "+
					"(heartbeat_interval + lease_ttl + max(NATS election %v s, lease_ttl) = %v + %v + %v = %v s: the leader's last beat up to heartbeat_interval before it died, "+
					"the lease's stream elected and the key expired up to max(%v, lease_ttl) after, a campaign within lease_ttl more, with room for a loaded host): the router would fail open during it",
					pjsip.ErrValue, s.FailOpenAfter.Seconds(), cluster.ElectionBound.Seconds(), s.HeartbeatInterval.Seconds(), lease.Seconds(), election.Seconds(), need.Seconds(), cluster.ElectionBound.Seconds())}
		}
	}
	return nil
}

// shortHostname is the host's name up to its first dot, "" when unknown.
func shortHostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	h, _, _ = strings.Cut(h, ".")
	return h
}

// ContactKey is a contact's key in the cluster: AoR/URI (a URI starts
// with its scheme, so the first '/' of a key before "sip" ends the AoR).
func ContactKey(aor, uri string) string { return aor + "/" + uri }

// readyBound is how long a starting node waits for the cluster's
// verdicts before it probes and serves its own view.
const readyBound = 30 * time.Second

// node is the daemon's part in a cluster: the Cluster, the sinks' run
// while this node leads, and what the log says of the cluster's changes.
type node struct {
	d   *Daemon
	c   *cluster.Cluster
	cfg cluster.Config
	raw []pjsip.ClusterOption // the section as read at start, to warn when a reload changes it

	lead    chan struct{} // capacity 1: the Leading hook changed leading
	moved   chan struct{} // capacity 1: the Members hook changed live
	changed *aorQueue     // the AoRs of the Verdict hook, for feedVerdicts

	mu      sync.Mutex           // guards leading, live and taken
	leading bool                 // the Leading hook's last edge
	live    []string             // the Members hook's last edge
	taken   metrics.ClusterStats // the verdicts taken back at the join

	natsLog lineLimit // the embedded server's errors logged (serverLog)
}

// newNode builds the Cluster of cfg; its hooks feed the sinks, the
// assignment and the log.
func newNode(d *Daemon, cfg cluster.Config, raw []pjsip.ClusterOption) (*node, error) {
	n := &node{d: d, cfg: cfg, raw: raw, lead: make(chan struct{}, 1), moved: make(chan struct{}, 1), changed: newAORQueue()}
	c, err := cluster.New(cfg, cluster.Hooks{Leading: n.leadingEdge, Verdict: n.verdict, Members: n.membersEdge,
		Configured: n.configuredContact, ServerLog: n.serverLog, Notice: d.log.Notice})
	if err != nil {
		return nil, err
	}
	n.c = c
	n.warnSecurity(c.CertExpiry(), time.Now())
	return n, nil
}

// configuredContact is the Configured hook: whether the running
// configuration has the contact of key (the engine's table).
func (n *node) configuredContact(key string) bool {
	aor, uri, ok := splitContactKey(key)
	return ok && n.hasContact(aor, uri)
}

// hasContact reports whether the engine has the contact uri of aor.
func (n *node) hasContact(aor, uri string) bool {
	a, ok := n.d.eng.AoR(aor)
	return ok && slices.ContainsFunc(a.Contacts, func(c engine.ContactSnapshot) bool { return c.URI == uri })
}

// stats is the node's metrics state: the verdicts taken back at the
// join, and the cluster as this node sees it now.
func (n *node) stats() metrics.ClusterStats {
	n.mu.Lock()
	s := n.taken
	n.mu.Unlock()
	v, cs := n.c.View(), n.c.Stats()
	s.InCluster, s.Leading, s.StoreOK = v.InCluster, v.Leading, v.Store == ""
	for _, m := range v.Members {
		if m.Up {
			s.Up++
		} else {
			s.Down++
		}
	}
	s.Probed, s.Stale, s.Lagged, s.Pending = cs.Probes, cs.Stale, cs.Lagged, cs.Pending
	s.HandedOn, s.Foreign = cs.HandedOn, cs.Foreign
	s.CertExpiry = n.c.CertExpiry()
	return s
}

// leadingEdge is the Leading hook: it hands the edge to runSinks.
func (n *node) leadingEdge(leading bool) {
	n.mu.Lock()
	n.leading = leading
	n.mu.Unlock()
	select {
	case n.lead <- struct{}{}:
	default:
	}
}

// gate is the sinks' check before every push and heartbeat: only the
// leader changes the routers, and each push or heartbeat is fenced by
// the lease's safe deadline.
func (n *node) gate() (time.Time, error) {
	if until, ok := n.c.LeadingUntil(); ok {
		return until, nil
	}
	if v := n.c.View(); !v.InCluster {
		return time.Time{}, errors.New("this node is not in the cluster (NATS or its JetStream quorum lost): it pushes nothing")
	}
	return time.Time{}, errors.New("this node does not lead the cluster: it pushes nothing")
}

// runSinks runs the sinks while this node leads, until ctx ends: the
// Leading hook's true edge starts them from the cluster's verdicts (each
// sink's first session re-asserts every level it knows), the false edge
// stops them, cancelled and waited for, releasing nothing: the next
// leader re-asserts the same verdicts.
func (n *node) runSinks(ctx context.Context) {
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.lead:
		}
		n.mu.Lock()
		leading := n.leading
		n.mu.Unlock()
		switch {
		case leading && stop == nil:
			n.d.sinks.Resync() // the levels from the cluster's verdicts as they are now
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { n.d.sinks.Run(sctx); close(done) }()
			stop = func() { cancel(); <-done }
			n.d.log.Notice(slog.LevelInfo, "cluster: this node leads: it runs the sinks")
		case !leading && stop != nil:
			stop()
			stop = nil
			n.d.log.Notice(slog.LevelWarn, "cluster: this node stopped leading: its sinks stopped, released nothing")
		}
	}
}

// verdict is the Verdict hook: it queues the contact's AoR for the
// sinks (feedVerdicts), never waiting on their lock, and the log says the
// cluster's new status with the votes.
func (n *node) verdict(v cluster.Verdict) {
	aor, uri, ok := splitContactKey(v.Contact)
	if !ok {
		return
	}
	n.changed.add(aor)
	switch {
	case v.Status == v.From && v.Draining:
		n.d.log.Line(time.Now(), fmt.Sprintf("qualifyd: cluster: Contact %s/%s is now draining (%s)", aor, uri, votesText(v.Votes)))
	case v.Status == v.From:
		n.d.log.Line(time.Now(), fmt.Sprintf("qualifyd: cluster: Contact %s/%s is no longer draining (%s)", aor, uri, votesText(v.Votes)))
	case v.Status == qualify.Reachable || v.Status == qualify.Unreachable:
		n.d.log.Line(time.Now(), verdictLine(aor, uri, v))
	}
}

// verdictLine is the log's line of a cluster status change:
// "qualifyd: cluster: Contact AOR/URI is now Unreachable (2 of 3
// vantages: a=Unreachable b=Unreachable c=Reachable)".
func verdictLine(aor, uri string, v cluster.Verdict) string {
	agree := 0
	for _, b := range v.Votes {
		if b.Status == v.Status {
			agree++
		}
	}
	return fmt.Sprintf("qualifyd: cluster: Contact %s/%s is now %s (%d of %d vantages: %s)", aor, uri, v.Status, agree, len(v.Votes), votesText(v.Votes))
}

// votesText is "a=Unreachable b=Reachable(draining) c=NonQualified".
func votesText(votes []cluster.Vote) string {
	parts := make([]string, len(votes))
	for i, b := range votes {
		parts[i] = b.Node + "=" + b.Status.String()
		if b.Draining {
			parts[i] += "(draining)"
		}
	}
	return strings.Join(parts, " ")
}

// splitContactKey is ContactKey's inverse: the AoR ends at the last '/'
// before the URI's "sip:" or "sips:".
func splitContactKey(key string) (aor, uri string, ok bool) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' && (strings.HasPrefix(key[i+1:], "sip:") || strings.HasPrefix(key[i+1:], "sips:")) {
			return key[:i], key[i+1:], true
		}
	}
	return "", "", false
}

// report publishes this node's status edge of a contact, from the sinks'
// subscription, and logs when it leaves this node in disagreement with
// the cluster's status (once per own change).
func (n *node) report(ev engine.Event) {
	key := ContactKey(ev.AoR, ev.URI)
	n.c.ReportDrain(key, ev.To, ev.Draining)
	if ev.Kind != engine.StatusChanged || !verdict(ev) {
		return
	}
	if cs := n.c.Status(key); cs != ev.To && (cs == qualify.Reachable || cs == qualify.Unreachable) {
		n.d.log.Line(time.Now(), fmt.Sprintf("qualifyd: cluster: vantages disagree on Contact %s/%s: this node (%s) says %s, the cluster %s (%s)",
			ev.AoR, ev.URI, n.cfg.Self, ev.To, cs, votesText(n.c.Votes(key))))
	}
}

// reportAll publishes this node's status of every contact it probes, as
// the engine holds it now: the levels again, for the votes of the edges
// the sinks' subscription lost (a status not yet decided withdraws the
// vote, as its edge would have).
func (n *node) reportAll() {
	for _, ct := range n.d.eng.Contacts() {
		if !ct.Elsewhere {
			n.c.ReportDrain(ContactKey(ct.AoR, ct.URI), ct.Status, ct.Phase == qualify.Draining)
		}
	}
}

// clusterSource is the sinks' view in cluster mode: the engine's snapshots
// with each contact's status replaced by the cluster's (NonQualified,
// pushed as nothing, for a contact the cluster has no verdict of), and
// its drain (a Reachable contact a live vantage's peer asked for a
// pause: out of routing, phase draining), so that the sinks and the
// panic rule follow the cluster. The cluster
// publishes verdicts, not a node's runs of failures: each contact's
// phase is its verdict's (never suspect), and its evidence is the
// verdict as it stands now, so a down held in a panic is pushed when the
// panic ends.
type clusterSource struct {
	eng *engine.Engine
	c   *cluster.Cluster
}

// AoR is the engine's snapshot of the AoR name with the cluster's
// statuses.
func (s clusterSource) AoR(name string) (engine.AoRSnapshot, bool) {
	a, ok := s.eng.AoR(name)
	if !ok {
		return a, false
	}
	a.Available = false
	now := s.eng.Now() // the sinks' wall clock, as the engine's probe ends are
	for i := range a.Contacts {
		ct := &a.Contacts[i]
		key := ContactKey(a.Name, ct.URI)
		ct.Status = s.c.Status(key)
		st := qualify.State{Status: ct.Status, Draining: s.c.Draining(key)}
		ct.Routable = a.Policy.RoutableState(st)
		ct.Phase, ct.Last.At = qualify.Healthy, now
		switch {
		case ct.Status == qualify.Unreachable:
			ct.Phase = qualify.Down
		case st.Draining:
			ct.Phase = qualify.Draining
		}
		a.Available = a.Available || ct.Routable
	}
	return a, true
}

// digestOf is the configuration's digest that the nodes compare: what
// decides what the leader pushes, so that two nodes whose files would
// push differently are told apart. It covers every AoR's name, contacts
// and qualify policy, the endpoints, the sinks (without their secrets,
// which it must not leak even hashed, nor their file and line) and the
// panic rule.
func digestOf(conf *pjsip.Config) string {
	h := sha256.New()
	policies := map[*qualify.Policy]int{} // shared: each formatted once
	var order []*qualify.Policy
	var buf [binary.MaxVarintLen64]byte
	for i := range conf.AoRs {
		a := &conf.AoRs[i]
		p, ok := policies[a.Policy]
		if !ok {
			p = len(order)
			policies[a.Policy] = p
			order = append(order, a.Policy)
		}
		writeList(h, a.Name, a.Contacts)
		h.Write(binary.AppendUvarint(buf[:0], uint64(p)))
	}
	for i, p := range order {
		a := probe.AoR{Policy: p}
		fmt.Fprintf(h, "policy %d %#v\n", i, a.PolicyValue())
	}
	h.Write([]byte("endpoints\n"))
	for _, e := range conf.Endpoints {
		writeList(h, e.Name, e.AoRs)
	}
	for _, def := range conf.Sinks {
		s := *def
		s.File, s.Line, s.Secret, s.SecretFile = "", 0, "", ""
		fmt.Fprintf(h, "sink %#v\n", s)
	}
	fmt.Fprintf(h, "panic %#v\n", conf.Panic)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// writeList writes name and items to w, each ended by a 0 byte, and a 1
// byte after the last, so that an item cannot pass for the next name.
func writeList(w io.Writer, name string, items []string) {
	w.Write([]byte(name))
	w.Write([]byte{0})
	for _, it := range items {
		w.Write([]byte(it))
		w.Write([]byte{0})
	}
	w.Write([]byte{1})
}

// configured announces the applied configuration's digest and how many
// contacts this node probes.
func (n *node) configured(conf *pjsip.Config) {
	n.c.SetDigest(digestOf(conf))
	n.announceProbes()
}

// watchEvery is how often the node compares its view with the one it
// logged last.
const watchEvery = 500 * time.Millisecond

// logged is what the watch last logged of the cluster.
type logged struct {
	in       bool     // InCluster
	leader   string   // the leader
	disagree []string // the nodes whose digest differs from the leader's
}

// watch logs the cluster's changes this node sees, until ctx ends: its
// leaving and rejoining the cluster, the leader, and the nodes whose
// configuration differs from the leader's.
func (n *node) watch(ctx context.Context) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	last := logged{in: true}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		last = n.check(last, n.c.View())
	}
}

// check logs what changed in v since last, and returns what it logged.
func (n *node) check(last logged, v cluster.View) logged {
	disagree := disagreeing(v)
	switch {
	case last.in && !v.InCluster:
		n.d.log.Notice(slog.LevelError, "cluster: this node lost the cluster (NATS, or its JetStream quorum): it probes and serves its own view and pushes nothing; the routers fail open after their failopen_after")
	case !last.in && v.InCluster:
		n.d.log.Notice(slog.LevelInfo, "cluster: this node is in the cluster again")
	}
	if v.InCluster && v.Leader != last.leader {
		n.d.log.Notice(slog.LevelInfo, "cluster: leader is "+cmp.Or(v.Leader, "none"))
	}
	if !slices.Equal(disagree, last.disagree) && len(disagree) > 0 {
		n.d.log.Notice(slog.LevelWarn, "cluster: the configuration of "+strings.Join(disagree, ",")+" differs from the leader's ("+v.Leader+") in its AoRs, policies, endpoints, sinks or panic rule: reload every node with the same file")
	}
	return logged{in: v.InCluster, leader: v.Leader, disagree: disagree}
}

// disagreeing lists the live nodes whose digest differs from the
// leader's; none when the leader is unknown or said none.
func disagreeing(v cluster.View) []string {
	var lead string
	for _, m := range v.Members {
		if m.Name == v.Leader && m.Up {
			lead = m.Digest
		}
	}
	var out []string
	for _, m := range v.Members {
		if lead != "" && m.Up && m.Digest != "" && m.Digest != lead {
			out = append(out, m.Name)
		}
	}
	return out
}

// View is the web hook of GET /api/v1/cluster: this node's view.
func (n *node) View() api.Cluster {
	v := n.c.View()
	out := api.Cluster{Node: v.Self, InCluster: v.InCluster, Leading: v.Leading, Leader: v.Leader,
		Quorum: n.cfg.Quorum.String(), Vantages: n.cfg.Vantages, Disagree: disagreeing(v)}
	if out.Disagree == nil {
		out.Disagree = []string{}
	}
	out.Foreign, out.StoreError = append([]string{}, v.Foreign...), v.Store
	for _, m := range v.Members {
		out.Members = append(out.Members, api.ClusterMember{Name: m.Name, Up: m.Up, Since: api.At(m.Since), Probes: m.Probes})
	}
	return out
}

// Votes is the web hook of a contact's votes: the cluster's status and
// each live vantage's; ok false for a contact the engine does not have.
func (n *node) Votes(aor, uri string) (qualify.Status, []api.Vote, bool) {
	if !n.hasContact(aor, uri) {
		return qualify.NonQualified, nil, false
	}
	key := ContactKey(aor, uri)
	votes := n.c.Votes(key)
	out := make([]api.Vote, len(votes))
	for i, b := range votes {
		out[i] = api.Vote{Node: b.Node, Status: b.Status.String(), Draining: b.Draining}
	}
	return n.c.Status(key), out, true
}

// waitReady waits until the cluster has given this node its verdicts
// back, at most readyBound, so that a restarted node serves and pushes
// the cluster's statuses, not its own first probes'.
func (n *node) waitReady(ctx context.Context) {
	t := time.NewTimer(readyBound)
	defer t.Stop()
	select {
	case <-n.c.Ready():
		n.d.log.Notice(slog.LevelInfo, "cluster: joined as "+n.cfg.Self+": the cluster's verdicts read back")
		total, down := n.c.Verdicts()
		n.mu.Lock()
		n.taken = metrics.ClusterStats{Reachable: total - down, Unreachable: down}
		n.mu.Unlock()
		n.d.log.Notice(slog.LevelInfo, fmt.Sprintf("cluster: took %d verdicts back from the cluster (%d Unreachable)", total, down))
	case <-t.C:
		why := ""
		if e := n.c.StartError(); e != "" {
			why = " (" + e + ")"
		}
		n.d.log.Notice(slog.LevelError, fmt.Sprintf("cluster: no cluster within %v%s: this node probes and serves its own view and pushes nothing until it joins", readyBound, why))
	case <-ctx.Done():
	}
}

// sameSection reports whether a reload's cluster section is the one the
// node started with (its options and values in order).
func sameSection(a []pjsip.ClusterOption, b *pjsip.Cluster) bool {
	if b == nil {
		return a == nil
	}
	return slices.EqualFunc(a, b.Options, func(x, y pjsip.ClusterOption) bool { return x.Key == y.Key && x.Value == y.Value })
}

// clusterView is web.Config.Cluster: ok false for a single node.
func (d *Daemon) clusterView() (api.Cluster, bool) {
	if d.cluster == nil {
		return api.Cluster{}, false
	}
	return d.cluster.View(), true
}

// votes is web.Config.Votes: ok false for a single node.
func (d *Daemon) votes(aor, uri string) (qualify.Status, []api.Vote, bool) {
	if d.cluster == nil {
		return qualify.NonQualified, nil, false
	}
	return d.cluster.Votes(aor, uri)
}
