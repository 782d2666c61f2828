package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// runExternal starts a one-node cluster on the NATS server s with the
// nats_ options given, and waits until it has read the cluster back and
// leads.
func runExternal(t *testing.T, s *server.Server, opts ...string) {
	t.Helper()
	c := set(t, append([]string{"nodes", "a", "nats_url", s.ClientURL(), "member_ttl", "3", "lease_ttl", "3"}, opts...)...)
	if err := c.Finish("a"); err != nil {
		t.Fatal(err)
	}
	cl, err := New(c, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-cl.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("not ready within 30s")
	}
	waitFor(t, 30*time.Second, "a leads", cl.Leading)
}

// startNATS starts a JetStream server of o's options on loopback.
func startNATS(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.JetStream, o.StoreDir, o.NoSigs, o.NoLog = "127.0.0.1", server.RANDOM_PORT, true, t.TempDir(), true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	return s
}

// TestExternalNATSNkey: nats_nkey authenticates with the seed file.
func TestExternalNATSNkey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	file := t.TempDir() + "/seed"
	write(t, file, string(seed)+"\n", 0o600)
	s := startNATS(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	runExternal(t, s, "nats_nkey", file)
}

// TestExternalNATSCreds: nats_creds authenticates with a user JWT of an
// operator's account, and its seed.
func TestExternalNATSCreds(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	opub, _ := op.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	acc, _ := nkeys.CreateAccount()
	apub, _ := acc.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	ajwt, err := ac.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	upub, _ := user.PublicKey()
	useed, _ := user.Seed()
	ujwt, err := jwt.NewUserClaims(upub).Encode(acc)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	file := t.TempDir() + "/q.creds"
	write(t, file, string(creds), 0o600)
	sys, _ := nkeys.CreateAccount()
	spub, _ := sys.PublicKey()
	sjwt, err := jwt.NewAccountClaims(spub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	if err := resolver.Store(spub, sjwt); err != nil {
		t.Fatal(err)
	}
	s := startNATS(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver, SystemAccount: spub})
	runExternal(t, s, "nats_creds", file)
}
