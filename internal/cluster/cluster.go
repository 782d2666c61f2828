package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Hooks are what the Cluster tells the daemon, as edges. They are called
// from the Cluster's goroutines, one at a time per hook, and must not
// block: they hand the edge on (a channel, a reconciler's wake-up).
type Hooks struct {
	// Leading is called with true when this node takes the lease and
	// with false when it stops leading: when a renewal failed until the
	// local deadline, the lease was taken, or Run ends. Leading is the
	// check to make before each push; this hook starts and stops the
	// sinks.
	Leading func(leading bool)
	// Verdict is called on each change of the cluster's status of a
	// contact.
	Verdict func(Verdict)
	// Members is called with the live nodes, sorted, each time they
	// change (the first time once this node has seen the members), after
	// the verdicts have been decided again for them: the daemon then
	// probes the contacts Probes(key, live, Vantages, Self) gives it.
	Members func(live []string)
	// Configured reports whether this node's configuration has contact
	// now; nil means every contact. It is a query, not an edge: the
	// leader asks it before it deletes the verdict of a contact no vote
	// holds (forget.go), and a starting node before it withdraws its
	// votes of contacts its file no longer has. It must not call the
	// Cluster.
	Configured func(contact string) bool
	// ServerLog is called with each error of the embedded NATS server,
	// one line (a route refused: its TLS handshake or its
	// credentials failed, with the peer's address); nil drops them.
	ServerLog func(line string)
	// Notice, if set, logs what the cluster itself says: a bucket that
	// could not be created (with its cause) or whose settings were
	// updated to the file's.
	Notice func(level slog.Level, msg string, attrs ...slog.Attr)
}

// Member is one node as this node sees it.
type Member struct {
	// Name is the node's name.
	Name string
	// Up is whether its membership key is present.
	Up bool
	// Since is when it announced itself (up) or when this node saw it
	// leave (down); zero for a node never seen.
	Since time.Time
	// Probes is how many contacts it said it probes.
	Probes int
	// Digest is what it said of its configuration (SetDigest): the
	// daemon's hash of the AoRs it assigns, "" for none said.
	Digest string
	// run is the run it announced (announcement.Run).
	run string
}

// View is the cluster as this node sees it.
type View struct {
	// Self is this node's name.
	Self string
	// InCluster is whether this node's membership was renewed within its
	// deadline: false when it lost NATS or NATS lost its JetStream
	// quorum, and then Members and Leader are the last ones seen.
	InCluster bool
	// Leading is whether this node holds the lease now.
	Leading bool
	// Leader is the lease's holder as last seen (by the watch of the
	// key or a campaign's read of it; this node itself as soon as it
	// leads), "" for none or when this node is not in the cluster and
	// does not lead (it cannot know).
	Leader string
	// Members are every configured node, in the file's order.
	Members []Member
	// Store is why this node cannot store (its embedded server's
	// JetStream disabled: a full disk), "" when it can; while it cannot,
	// it is out of the cluster and does not lead.
	Store string
	// Foreign names, sorted, the nodes not in nodes= whose membership,
	// votes or lease this node has seen since it started: they never
	// count, and the leader removes their keys.
	Foreign []string
}

// Cluster is one node of a cluster. New starts its embedded server, Run
// takes part in the cluster until its context ends; the methods are
// safe for concurrent use.
type Cluster struct {
	cfg   Config
	hooks Hooks
	srv   atomic.Pointer[server.Server] // the embedded server; nil with an external NATS
	// restart starts the embedded server again, with the options it
	// started with (store.go); nil with an external NATS.
	restart func() (*server.Server, error)
	nc      *nats.Conn
	files   atomic.Pointer[files] // the options' files, as last read (Reload)
	lease   term
	member  term
	start   time.Time
	run     string        // this run's name, announced with the membership and carried by each vote
	wake    chan struct{} // the publisher's, capacity 1
	vacant  chan struct{} // the candidate's, capacity 1
	ready   chan struct{} // closed once the verdicts are read back
	yield   chan struct{} // yieldStreams's, capacity 1

	// l is the cluster's decision state: the members, votes, records
	// and writes to make (ledger.go). The Cluster holds none of its own.
	l *ledger

	// mu guards the fields below: the membership's and the lease's
	// state as the I/O sees it. It is never held together with l.mu or
	// verdictMu, nor while calling a hook.
	mu         sync.Mutex
	memberSent time.Time                        // send time of this node's last renewal that succeeded
	memberLife time.Duration                    // the members bucket's TTL as last read, 0 before the first read
	electing   bool                             // a renewal failed since the last that succeeded, and this node still reached a majority then (inClusterLocked)
	storeErr   string                           // why this node cannot store now, "" when it can (store.go)
	free       func(dir string) (uint64, error) // the store's free space (freeSpace; the tests fill it)
	selfSeen   time.Time                        // when the members watch last delivered this node's key
	leader     string
	leaderRev  uint64 // the revision of the lease key leader was read from
	held       bool
	heldSent   time.Time // send time of the lease's last renewal that succeeded
	heldUntil  time.Time // when this node stops acting as the leader, from heldSent and the lease's term
	terms      uint64    // counts the times this node took the lease
	ttlTerm    uint64    // the term (terms) in which this node last set or found the members bucket's TTL (followMembersTTL)
	startErr   string    // why the buckets could not be created yet, "" once they are
	probes     int
	digest     string

	recordsSeq atomic.Uint64 // the highest revision the verdicts watch delivered (awaitRecords)
	rewatches  atomic.Uint64 // counts the times every watch was started again
	lagged     atomic.Uint64 // counts the watches started again because they lagged
	stepDowns  atomic.Uint64 // counts the buckets' stream leaderships this node's server handed on

	// The lock order: leadingMu, then verdictMu, then l.mu (the
	// ledger's, innermost); leadingMu, then mu. The Leading hook runs
	// under leadingMu, the Verdict hook under verdictMu.
	leadingMu sync.Mutex // serialises the Leading hook
	verdictMu sync.Mutex // serialises deciding and the Verdict hook, so that edges keep their order
	closeOnce sync.Once
}

// New checks cfg (already Finished), starts the embedded NATS server
// (none with cfg.NATSURL) and connects this node's client to it. It
// fails before the node takes part when the route port is busy or NATS
// refuses the connection; Run does the rest.
func New(cfg Config, hooks Hooks) (*Cluster, error) {
	if err := cfg.checkNodes(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := cfg.checkTimings(); err != nil || cfg.Vantages < 1 {
		return nil, fmt.Errorf("cluster: the configuration was not finished (Config.Finish): %v", err)
	}
	run := newRun()
	c := &Cluster{cfg: cfg, hooks: hooks, lease: term{cfg.LeaseTTL}, member: term{cfg.MemberTTL},
		start: time.Now(), run: run, wake: make(chan struct{}, 1), vacant: make(chan struct{}, 1), yield: make(chan struct{}, 1),
		ready: make(chan struct{}), l: newLedger(cfg.Self, run, cfg.Nodes, cfg.Quorum, cfg.Vantages), free: freeSpace}
	if err := c.connect(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newRun names a run of a node: 48 random bits, so that a node that
// restarts never meets its previous run's name.
func newRun() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// connect reads the options' files, starts the embedded server if there
// is one and connects to NATS, reconnecting forever.
func (c *Cluster) connect() error {
	f, err := c.cfg.readFiles(time.Now())
	if err != nil {
		return fmt.Errorf("cluster: node %q: %w", c.cfg.Self, err)
	}
	c.files.Store(f)
	opts := []nats.Option{nats.Name("qualifyd " + c.cfg.Self), nats.MaxReconnects(-1),
		nats.ReconnectWait(c.member.retry())}
	url := c.cfg.NATSURL
	if url == "" {
		opt, err := c.embed(f.secret)
		if err != nil {
			return err
		}
		opts = append(opts, opt...)
	} else if opts, err = c.externalOptions(opts, f.secret); err != nil {
		return err
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("cluster: node %q: connect to NATS: %w", c.cfg.Self, err)
	}
	c.nc = nc
	return nil
}

// embed starts the embedded server and returns the options of the
// in-process connection to it.
func (c *Cluster) embed(secret string) ([]nats.Option, error) {
	var tc *tls.Config
	if c.cfg.RouteTLS() {
		names := make([]string, len(c.cfg.Nodes))
		for i, n := range c.cfg.Nodes {
			names[i] = n.Name
		}
		tc = routeTLS(c.files.Load, names)
	}
	token := rand.Text()
	c.restart = func() (*server.Server, error) { return startServer(&c.cfg, token, tc, secret, c.hooks.ServerLog) }
	srv, err := c.restart()
	if err != nil {
		return nil, err
	}
	c.srv.Store(srv)
	return []nats.Option{nats.InProcessServer(inProcess{c}), nats.Token(token)}, nil
}

// server is the embedded server now, nil with an external NATS.
func (c *Cluster) server() *server.Server { return c.srv.Load() }

// inProcess connects the node's client to the embedded server in
// process, to the one running now: a reconnection after the server
// was started again (store.go) reaches the new one.
type inProcess struct{ c *Cluster }

// InProcessConn is nats.InProcessConnProvider's.
func (p inProcess) InProcessConn() (net.Conn, error) {
	s := p.c.server()
	if s == nil {
		return nil, errors.New("cluster: no embedded server")
	}
	return s.InProcessConn()
}

// externalOptions adds an external NATS's TLS and credentials to opts:
// the CA and the client certificate are taken from the files at each
// connection, so that a reload rotates them.
func (c *Cluster) externalOptions(opts []nats.Option, password string) ([]nats.Option, error) {
	var certCB nats.TLSCertHandler
	var caCB nats.RootCAsHandler
	if c.cfg.NATSCert != "" {
		certCB = func() (tls.Certificate, error) { return *c.files.Load().cert, nil }
	}
	if c.cfg.NATSCA != "" {
		caCB = func() (*x509.CertPool, error) { return c.files.Load().pool, nil }
	}
	if certCB != nil || caCB != nil {
		opts = append(opts, nats.ClientTLSConfig(certCB, caCB))
	}
	switch {
	case c.cfg.NATSCreds != "":
		opts = append(opts, nats.UserCredentials(c.cfg.NATSCreds))
	case c.cfg.NATSNkey != "":
		opt, err := nats.NkeyOptionFromSeed(c.cfg.NATSNkey)
		if err != nil {
			return nil, fmt.Errorf("cluster: node %q: %w", c.cfg.Self, fileErr("nats_nkey", c.cfg.NATSNkey, err))
		}
		opts = append(opts, opt)
	case c.cfg.NATSUser != "":
		opts = append(opts, nats.UserInfo(c.cfg.NATSUser, password))
	}
	return opts, nil
}

// Reload reads the options' files again: the certificates, keys and CAs
// serve from the next TLS handshake on (a route or a connection made
// again); the secrets apply at the next start. On an error it keeps the
// files it had. It returns when the node's certificate expires (zero
// without one).
func (c *Cluster) Reload() (time.Time, error) {
	f, err := c.cfg.readFiles(time.Now())
	if err != nil {
		return time.Time{}, fmt.Errorf("cluster: node %q: %w", c.cfg.Self, err)
	}
	c.files.Store(f)
	return f.Expiry(), nil
}

// CertExpiry is when the node's certificate (tls_cert or nats_cert), as
// last read, expires; zero without one.
func (c *Cluster) CertExpiry() time.Time {
	if f := c.files.Load(); f != nil {
		return f.Expiry()
	}
	return time.Time{}
}

// Close closes the connection and stops the embedded server; Run calls
// it on its way out. It is idempotent.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.nc != nil {
			c.nc.Close()
		}
		if s := c.srv.Swap(nil); s != nil {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
}

// Run takes part in the cluster until ctx ends: it creates the buckets
// (waiting for JetStream), reads the verdicts back, then announces the
// node, campaigns for the lease, publishes this node's votes and watches
// everyone's. On the way out it stops leading, releases the lease and its
// membership, and closes the node (Close). It returns ctx's error.
func (c *Cluster) Run(ctx context.Context) error {
	defer c.Close()
	b, err := c.buckets(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	announced := make(chan struct{})
	wg.Go(func() { c.announce(ctx, b.members, announced) })
	wg.Go(func() { c.watchLease(ctx, b.lease) })
	wg.Go(func() { c.publish(ctx, b) })
	wg.Go(func() { c.watchVerdicts(ctx, b, announced) })
	wg.Go(func() { c.yieldStreams(ctx, b) })
	wg.Go(func() { c.newLease(ctx, b).run(ctx) })
	wg.Go(func() { c.guardStore(ctx) })
	wg.Wait()
	return ctx.Err()
}

// newLease is the node's lease over b's lease bucket, its term first
// from the shorter of the file's TTL and the bucket's as found now.
func (c *Cluster) newLease(ctx context.Context, b *buckets) *lease {
	bucket := leaseBucket{js: b.js, kv: b.lease, replicas: c.cfg.Replicas()}
	t := c.lease
	rctx, cancel := context.WithTimeout(ctx, c.lease.ttl/3)
	defer cancel()
	if ttl, err := bucket.TTL(rctx); err == nil {
		t = term{min(ttl, c.cfg.LeaseTTL)}
	}
	return &lease{t: t, want: c.cfg.LeaseTTL, self: []byte(c.cfg.Self), kv: b.lease, vacant: c.vacant,
		set: c.setLeading, bucket: bucket, changed: c.leaseTTLChanged, seen: c.seeLeader,
		foreign: func(holder string) bool { return !c.l.ours(holder) }, fit: c.storeFit}
}

// Ready is closed once the node has read the cluster's verdicts back
// (members, recorded verdicts and votes): before it, Verdicts is empty.
func (c *Cluster) Ready() <-chan struct{} { return c.ready }

// Leading reports whether this node holds the lease now: it took it and
// its last successful renewal was sent less than 2/3 of the lease's TTL
// (the bucket's, see lease.follow) ago. Make this check right before
// each push.
func (c *Cluster) Leading() bool {
	_, ok := c.LeadingUntil()
	return ok
}

// LeadingUntil is when this node stops acting as the leader unless it
// renews the lease meanwhile (the lease's safe deadline), ok false when
// it does not lead now. Every push and heartbeat runs under a context
// that ends then, so that a node paused past it (SIGSTOP, a VM frozen)
// sends nothing when it resumes until it holds the lease again.
func (c *Cluster) LeadingUntil() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heldUntil, c.leadingAt(time.Now())
}

// leadingAt is Leading at now; c.mu held.
func (c *Cluster) leadingAt(now time.Time) bool {
	return c.held && now.Before(c.heldUntil) && c.storeErr == ""
}

// StartError is why the buckets could not be created or opened yet, ""
// when they were (or no attempt failed).
func (c *Cluster) StartError() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startErr
}

// setStartError records StartError.
func (c *Cluster) setStartError(s string) {
	c.mu.Lock()
	c.startErr = s
	c.mu.Unlock()
}

// notice is Hooks.Notice, or nothing.
func (c *Cluster) notice(level slog.Level, msg string) {
	if c.hooks.Notice != nil {
		c.hooks.Notice(level, msg)
	}
}

// leaseTTLChanged logs the holder's update of the lease bucket's TTL.
func (c *Cluster) leaseTTLChanged(from, to time.Duration, err error) {
	if err != nil {
		c.notice(slog.LevelError, fmt.Sprintf("cluster: bucket %s: TTL %v, the file's lease_ttl %v: not updated (%v): this node leads by the bucket's %v",
			bucketLease, from, to, err, min(from, to)))
		return
	}
	c.notice(slog.LevelInfo, fmt.Sprintf("cluster: bucket %s: TTL updated from %v to the file's lease_ttl %v", bucketLease, from, to))
}

// View returns the cluster as this node sees it now.
func (c *Cluster) View() View {
	c.mu.Lock()
	now := time.Now()
	v := View{Self: c.cfg.Self, Leading: c.leadingAt(now),
		InCluster: c.inClusterLocked(now)}
	switch {
	case v.Leading:
		v.Leader = c.cfg.Self // known from the lease's own write, before its watch delivers it
	case v.InCluster:
		v.Leader = c.leader
	}
	v.Store = c.storeErr
	c.mu.Unlock()
	c.l.view(&v, c.cfg.Nodes)
	return v
}

// Status returns the cluster's status of contact (NonQualified when it
// has none).
func (c *Cluster) Status(contact string) qualify.Status { return c.l.status(contact) }

// Verdicts counts the contacts the cluster has a verdict of (Reachable
// or Unreachable) as this node holds them now, and of those the
// Unreachable.
func (c *Cluster) Verdicts() (total, unreachable int) { return c.l.verdicts() }

// MaxContactLen bounds a contact's key: a NATS subject of more than 4 KiB
// would close the connection, and base64 makes the key 4/3 as long.
const MaxContactLen = 2048

// Report publishes this node's status of a contact it probes. It never
// blocks: the latest status of each contact waits for the publisher,
// which retries until NATS takes it. NonQualified and Removed withdraw
// the node's vote: the daemon withdraws it when the contact stops being
// one this node probes (Probes turned false), so that no stale vote counts
// if the node becomes its vantage again. It returns false, and publishes
// nothing, for a contact key longer than MaxContactLen.
func (c *Cluster) Report(contact string, s qualify.Status) bool {
	return c.ReportDrain(contact, s, false)
}

// ReportDrain is Report of a contact whose peer asked this node for a
// pause (draining, qualify-semantics §11.4) or not: the vote carries
// it, and while one live vantage's does, the cluster holds a Reachable
// contact out of routing as draining (Draining).
func (c *Cluster) ReportDrain(contact string, s qualify.Status, draining bool) bool {
	if len(contact) > MaxContactLen {
		return false
	}
	c.l.report(contact, s, draining, time.Now())
	c.poke()
	return true
}

// Draining reports whether the cluster holds contact out of routing as
// draining: it is Reachable and a live vantage's vote says its peer
// asked for a pause.
func (c *Cluster) Draining(contact string) bool { return c.l.draining(contact) }

// voteOf is the status a vote of s holds in the votes bucket:
// NonQualified for every status that withdraws the vote.
func voteOf(s qualify.Status) qualify.Status {
	if s == qualify.Reachable || s == qualify.Unreachable {
		return s
	}
	return qualify.NonQualified
}

// Vouch reports whether this node, as the leader, can vouch for the
// verdicts it pushes (the sinks' check before each heartbeat): an error
// when it is out of the cluster, or when its own votes have stopped
// coming back through NATS (some are outstanding and none came back for
// MemberTTL; for an election more, up to max(ElectionBound, LeaseTTL),
// while this node still reaches a majority of the nodes), so that the
// routers fail open instead of holding verdicts that no longer move.
func (c *Cluster) Vouch() error {
	now := time.Now()
	c.mu.Lock()
	in := c.inClusterLocked(now)
	c.mu.Unlock()
	if !in {
		return errors.New("this node is out of the cluster: its verdicts may be stale")
	}
	// A vote waits while JetStream elects the votes stream's leader: a
	// node that still reaches a majority gives it an election's time.
	n, stalled := c.l.stalled(now)
	if n > 0 && stalled > c.member.ttl && (stalled > c.member.ttl+max(ElectionBound, c.lease.ttl) || !c.reachesMajority()) {
		return fmt.Errorf("%d of this node's votes have not come back through NATS for %v (member_ttl %v): its verdicts may be stale", n, stalled.Round(100*time.Millisecond), c.member.ttl)
	}
	return nil
}

// SetProbes sets how many contacts this node probes, announced with its
// membership.
func (c *Cluster) SetProbes(n int) {
	c.mu.Lock()
	c.probes = n
	c.mu.Unlock()
}

// SetDigest sets what this node says of its configuration, announced
// with its membership at the next renewal (the daemon's hash of its AoRs,
// so that the nodes can tell whose file differs).
func (c *Cluster) SetDigest(d string) {
	c.mu.Lock()
	c.digest = d
	c.mu.Unlock()
}

// Votes returns the votes of contact's live vantages, in assignment
// order, as the tally holds them (NonQualified for a vantage that has
// published none).
func (c *Cluster) Votes(contact string) []Vote { return c.l.ballot(contact) }

// poke wakes the publisher.
func (c *Cluster) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// setLeading is the lease's record of its state; it calls the Leading
// hook on each edge and, on taking the lease, has the ledger adopt the
// recorded verdicts and queue those the bucket does not hold.
func (c *Cluster) setLeading(held bool, sent, until time.Time) {
	c.leadingMu.Lock()
	defer c.leadingMu.Unlock()
	var orphans []string
	if held {
		c.verdictMu.Lock()
		var vs []Verdict
		vs, orphans = c.l.lead(true) // the adopted verdicts are the records already
		c.tell(vs)
		c.verdictMu.Unlock()
	} else {
		c.l.lead(false)
	}
	c.mu.Lock()
	edge := held != c.held
	c.held, c.heldSent, c.heldUntil = held, sent, until
	if edge && held {
		c.terms++
	}
	c.mu.Unlock()
	c.dropOrphans(orphans)
	if held {
		c.pokeYield()
	}
	if edge && c.hooks.Leading != nil {
		c.hooks.Leading(held)
	}
	c.poke()
}

// decide runs f, an input to the ledger, and acts on its outcome: a
// write queued wakes the publisher, the verdicts go to the hook. One
// decision at a time, so that the hook sees the edges in the order they
// were decided.
func (c *Cluster) decide(f func() outcome) {
	c.verdictMu.Lock()
	defer c.verdictMu.Unlock()
	o := f()
	if o.Write {
		c.poke()
	}
	c.tell(o.Verdicts)
}

// tell hands the verdicts to the Verdict hook; verdictMu held.
func (c *Cluster) tell(vs []Verdict) {
	if c.hooks.Verdict != nil {
		for _, v := range vs {
			c.hooks.Verdict(v)
		}
	}
}
