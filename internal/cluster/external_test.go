package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// runExternal starts a one-node cluster on the NATS server s with the
// nats_ options given, and waits until it has read the cluster back and
// leads.
func runExternal(t *testing.T, s *server.Server, opts ...string) {
	t.Helper()
	runExternalURL(t, s.ClientURL(), opts...)
}

// runExternalURL is runExternal on the server of url.
func runExternalURL(t *testing.T, url string, opts ...string) {
	t.Helper()
	c := set(t, append([]string{"nodes", "a", "nats_url", url, "member_ttl", "3", "lease_ttl", "3"}, opts...)...)
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

// readmePermissions are the publish and subscribe permissions of
// qualifyd's NATS user in the NATS configuration of docs/cluster.md
// ("Securing qualifyd").
func readmePermissions(t *testing.T) (pub, sub []string) {
	t.Helper()
	readme, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	list := func(kind string) []string {
		m := regexp.MustCompile(kind + `: \{ allow: \[([^\]]*)\] \}`).FindSubmatch(readme)
		if m == nil {
			t.Fatalf("docs/cluster.md has no %s permissions", kind)
		}
		var out []string
		for _, q := range strings.Split(string(m[1]), ",") {
			out = append(out, strings.Trim(strings.TrimSpace(q), `"`))
		}
		return out
	}
	return list("publish"), list("subscribe")
}

// TestExternalNATSCreds: nats_creds authenticates with a user JWT of an
// operator's account that allows four streams, the user holding the
// README's permissions, over TLS with a client certificate (nats_ca,
// nats_cert, nats_key); the node runs, and the user makes no fifth
// bucket.
func TestExternalNATSCreds(t *testing.T) {
	dir, _ := tlsDir(t)
	op, _ := nkeys.CreateOperator()
	opub, _ := op.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	acc, _ := nkeys.CreateAccount()
	apub, _ := acc.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: 4, Consumer: -1}
	ajwt, err := ac.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	upub, _ := user.PublicKey()
	useed, _ := user.Seed()
	uc := jwt.NewUserClaims(upub)
	pub, sub := readmePermissions(t)
	uc.Pub.Allow.Add(pub...)
	uc.Sub.Allow.Add(sub...)
	ujwt, err := uc.Encode(acc)
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
	ca := newTestCA(t, t.TempDir())
	ca.issueNow(t, "localhost")
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: ca.dir + "/localhost.crt", KeyFile: ca.dir + "/localhost.key", CaFile: dir + "/ca.crt", Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	s := startNATS(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver, SystemAccount: spub,
		TLSConfig: tc, TLSTimeout: 5, TLSVerify: true})
	url := fmt.Sprintf("tls://localhost:%d", s.Addr().(*net.TCPAddr).Port)
	runExternalURL(t, url, "nats_creds", file, "nats_ca", ca.dir+"/ca.crt", "nats_cert", dir+"/{node}.crt", "nats_key", dir+"/{node}.key")
	nc, err := nats.Connect(url, nats.UserCredentials(file), nats.RootCAs(ca.dir+"/ca.crt"), nats.ClientCert(dir+"/a.crt", dir+"/a.key"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "other"}); err == nil {
		t.Fatal("qualifyd's user made a fifth bucket")
	}
	if _, err := nats.Connect(url, nats.UserCredentials(file), nats.RootCAs(ca.dir+"/ca.crt")); err == nil {
		t.Fatal("a connection without a client certificate was taken")
	}
}
