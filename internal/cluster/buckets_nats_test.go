package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer runs a NATS server on a random loopback port, with
// JetStream in a directory of the test's when jetStream is set, until
// the test ends, and returns its client URL.
func natsServer(t *testing.T, jetStream bool) string {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true, JetStream: jetStream}
	if jetStream {
		o.StoreDir = t.TempDir()
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		t.Fatal("NATS not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// notices keeps what the Cluster logged.
type notices struct {
	mu    sync.Mutex
	lines []string
}

func (n *notices) notice(_ slog.Level, msg string, _ ...slog.Attr) {
	n.mu.Lock()
	n.lines = append(n.lines, msg)
	n.mu.Unlock()
}

// has reports whether a line containing s was logged.
func (n *notices) has(s string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.ContainsFunc(n.lines, func(l string) bool { return strings.Contains(l, s) })
}

// runExternalLogged runs node a alone over the NATS at url with the TTLs,
// logging into log, until the test ends.
func runExternalLogged(t *testing.T, url string, memberTTL, leaseTTL time.Duration, log *notices) *Cluster {
	t.Helper()
	cfg := Config{Nodes: []Node{{Name: "a"}}, NATSURL: url, MemberTTL: memberTTL, LeaseTTL: leaseTTL}
	if err := cfg.Finish("a"); err != nil {
		t.Fatal(err)
	}
	return runLogged(t, cfg, log)
}

// runLogged runs a node of cfg, logging into log, until the test ends.
func runLogged(t *testing.T, cfg Config, log *notices) *Cluster {
	t.Helper()
	c, err := New(cfg, Hooks{Notice: log.notice})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// TestBucketErrorsLoggedWithCause: a NATS without JetStream leaves the
// buckets uncreated, and the node says why (once, not at every retry),
// as StartError does for the "no cluster within 30s" line.
func TestBucketErrorsLoggedWithCause(t *testing.T) {
	log := &notices{}
	c := runExternalLogged(t, natsServer(t, false), testTTL, testTTL, log)
	const want = "cluster: bucket qualifyd_members: not created or opened, retrying every 250ms: JetStream is not enabled on the NATS server or for this account"
	waitFor(t, 10*testTTL, "the cause logged", func() bool { return log.has(want) })
	if e := c.StartError(); !strings.HasPrefix(e, "bucket qualifyd_members: JetStream is not enabled") {
		t.Fatalf("StartError %q, want the cause", e)
	}
}

// TestBucketFailureLoggedOncePerCause: a failed attempt is logged when
// its cause differs from the last one logged, not at every retry, and
// each cause says what it is in the operator's words.
func TestBucketFailureLoggedOncePerCause(t *testing.T) {
	log := &notices{}
	c := &Cluster{hooks: Hooks{Notice: log.notice}}
	last := ""
	for _, err := range []error{jetstream.ErrJetStreamNotEnabled, jetstream.ErrJetStreamNotEnabledForAccount, context.DeadlineExceeded, context.DeadlineExceeded,
		jetstream.ErrLimitMarkerTTLNotSupported, errors.New(`nats: permissions violation for publish to "$JS.API.STREAM.CREATE.KV_qualifyd_members"`)} {
		last = c.bucketFailed(bucketMembers, err, last)
	}
	want := []string{
		"JetStream is not enabled on the NATS server or for this account: nats: API error: code=503 err_code=10076 description=jetstream not enabled",
		"JetStream is not enabled on the NATS server or for this account: nats: API error: code=503 err_code=10039 description=jetstream not enabled for account",
		"JetStream did not answer (no meta leader elected yet: fewer than a majority of the nodes reach each other): context deadline exceeded",
		"the NATS server is too old for the buckets' removal markers (nats-server 2.11 or later is needed): nats: limit marker TTLs not supported by server",
		`permission refused by NATS (the user may not use JetStream's API or the KV_qualifyd_* streams): nats: permissions violation for publish to "$JS.API.STREAM.CREATE.KV_qualifyd_members"`,
	}
	for i := range want {
		want[i] = "cluster: bucket qualifyd_members: not created or opened, retrying every 250ms: " + want[i]
	}
	if !slices.Equal(log.lines, want) {
		t.Fatalf("logged\n%s\nwant\n%s", strings.Join(log.lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestBucketSettingsFollowTheFile: buckets found with another TTL than
// the file's: the lease and members buckets are updated by the node once
// it holds the lease, which then leads by the file's lease_ttl; each
// change is logged.
func TestBucketSettingsFollowTheFile(t *testing.T) {
	url := natsServer(t, true)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range []string{bucketMembers, bucketLease} {
		if _, err := js.CreateKeyValue(ctx, ttlBucket(b, 1, testTTL)); err != nil {
			t.Fatal(err)
		}
	}
	log := &notices{}
	c := runExternalLogged(t, url, 2*testTTL, 2*testTTL, log)
	waitFor(t, 10*testTTL, "a leads", c.Leading)
	c.mu.Lock()
	term := c.heldUntil.Sub(c.heldSent)
	c.mu.Unlock()
	if want := 2 * testTTL * 2 / 3; term != want {
		t.Errorf("leads for %v after a renewal, want 2/3 of the file's lease_ttl %v", term, 2*testTTL)
	}
	for b, line := range map[string]string{
		bucketMembers: "cluster: bucket qualifyd_members: TTL updated from 3s to the file's member_ttl 6s",
		bucketLease:   "cluster: bucket qualifyd_lease: TTL updated from 3s to the file's lease_ttl 6s",
	} {
		waitFor(t, 10*testTTL, "the log says "+line, func() bool { return log.has(line) })
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil || st.TTL() != 2*testTTL {
			t.Errorf("bucket %s: TTL %v (%v), want the file's %v", b, st.TTL(), err, 2*testTTL)
		}
	}
}

// TestBucketReplicasFollowTheFile: a bucket whose replicas are fewer
// than nodes= gives (a cluster that grew) is updated to them by the next
// node that starts, which logs it.
func TestBucketReplicasFollowTheFile(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	js, ctx, cancel := nodes[0].jetStream(t)
	defer cancel()
	if _, err := js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucketVerdicts, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	replicas := func() int {
		kv, err := js.KeyValue(ctx, bucketVerdicts)
		if err != nil {
			return 0
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return 0
		}
		return st.(*jetstream.KeyValueBucketStatus).Config().Replicas
	}
	if r := replicas(); r != 1 {
		t.Fatalf("replicas %d after the test's update, want 1", r)
	}
	nodes[2].stop()
	log := &notices{}
	runLogged(t, nodes[2].cfg, log)
	const line = "cluster: bucket qualifyd_verdicts: settings updated from replicas 1, TTL 0s to the file's replicas 3, TTL 0s"
	took := waitFor(t, 10*testTTL, "the restarted node logs the update", func() bool { return log.has(line) })
	t.Logf("updated %v after the restart", took)
	if r := replicas(); r != 3 {
		t.Fatalf("replicas %d after the restart, want the file's 3", r)
	}
}

// TestMembersTTLSetOnceATerm: the leader sets the members bucket's TTL
// on taking the lease, as the lease bucket's, and does not read the
// bucket's settings again at each renewal of the lease: over six lease
// renewals (lease_ttl 3 s) the members bucket's status is asked at most
// once, by the node's own membership renewal (every 10 s, member_ttl
// 30 s).
func TestMembersTTLSetOnceATerm(t *testing.T) {
	url := natsServer(t, true)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var asked atomic.Int64
	sub, err := nc.Subscribe("$JS.API.STREAM.INFO.KV_"+bucketMembers, func(*nats.Msg) { asked.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c := runExternalLogged(t, url, 10*testTTL, testTTL, &notices{})
	waitFor(t, 10*testTTL, "a leads", c.Leading)
	renewals := func(n int) {
		c.mu.Lock()
		last := c.heldSent
		c.mu.Unlock()
		for range n {
			waitFor(t, testTTL, "a renewal of the lease", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				renewed := c.heldSent.After(last)
				last = c.heldSent
				return renewed
			})
		}
	}
	renewals(1) // the first term's settings done
	from := asked.Load()
	renewals(6)
	if n := asked.Load() - from; n > 1 {
		t.Errorf("the members bucket's status asked %d times over six renewals of the lease, want at most once (the membership's renewal)", n)
	}
}
