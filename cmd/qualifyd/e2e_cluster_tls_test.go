package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// Three `qualifyd run` processes whose routes use mutual TLS, with the
// CA, the certificates and the secret the README's openssl commands make.

// readmeCertificates runs the README's openssl commands (section
// "Securing qualifyd") in a new directory, for the nodes names instead
// of a b c, and returns the directory.
func readmeCertificates(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	runCertificates(t, dir, readmeCertScript(t), names...)
	return dir
}

// readmeCertScript is the README's block of openssl commands.
func readmeCertScript(t *testing.T) string {
	t.Helper()
	section := docSection(t, "docs/cluster.md", "**Certificates for the routes.**", "**Rotation.**")
	_, script, ok := strings.Cut(section, "```sh\n")
	script, _, ok2 := strings.Cut(script, "```")
	if !ok || !ok2 || !strings.Contains(script, "for node in a b c; do") || !strings.Contains(script, "-days 365") {
		t.Fatalf("the README's certificates section has no sh block looping over a b c for 365 days:\n%s", section)
	}
	return script
}

// runCertificates runs script in dir for the nodes names.
func runCertificates(t *testing.T, dir, script string, names ...string) {
	t.Helper()
	script = strings.Replace(script, "for node in a b c; do", "for node in "+strings.Join(names, " ")+"; do", 1)
	cmd := exec.Command("sh", "-e", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's openssl commands: %v\n%s", err, out)
	}
}

// tlsSection is a cluster section of nodes (name@route) with the routes'
// TLS and secret from dir.
func tlsSection(nodes []string, dir string) string {
	return fmt.Sprintf("[c]\ntype=cluster\nnodes=%s\nname=lab\nstore=cluster\nmember_ttl=%d\nlease_ttl=%d\n"+
		"tls_cert=%s/{node}.crt\ntls_key=%s/{node}.key\ntls_ca=%s/ca.crt\nsecret_file=%s/secret\n",
		strings.Join(nodes, ","), clusterTTLs, clusterTTLs, dir, dir, dir, dir)
}

// newTLSCluster starts nodes a, b and c with the routes' TLS of dir,
// probing one trunk, and waits until each has joined and one leads.
func newTLSCluster(t *testing.T, dir string) (*clusterProcs, []string) {
	t.Helper()
	l := newTrunkLab(t)
	var routes []string
	for _, n := range l.nodes {
		routes = append(routes, fmt.Sprintf("%s@127.0.0.1:%d", n.name, freePort(t, "tcp")))
	}
	writeFile(t, l.conf, fmt.Sprintf("[t]\ntype=aor\ncontact=%s\n%s\n", l.trunk.contact, liveOptions)+tlsSection(routes, dir))
	for _, n := range l.nodes {
		l.start(t, n)
	}
	for _, n := range l.nodes {
		eventually(t, 30*time.Second, n.name+" joined", func() bool { return n.logged("cluster: joined as " + n.name) })
	}
	l.leader(t, nil)
	l.clusterSays(t, "Reachable", 30*time.Second, l.leader(t, nil))
	return l, routes
}

// newTrunkLab is a lab of nodes a, b and c (not started) probing one
// trunk on a SIP peer, its file at l.conf still to write.
func newTrunkLab(t *testing.T) *clusterProcs {
	t.Helper()
	l := &clusterProcs{conf: filepath.Join(t.TempDir(), "qualifyd.conf")}
	peer, err := responder.Listen("127.0.0.1:0", l.drop.Decide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	addr := peer.Addr().String()
	l.trunk = &trunk{name: "t", dest: "sip:" + addr, contact: "sip:t@" + addr}
	for i := range 3 {
		l.nodes = append(l.nodes, &procNode{name: string(rune('a' + i)), sip: uint16(freePort(t, "udp")),
			http: fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), dir: t.TempDir()})
	}
	return l
}

// clusterView is n's GET /api/v1/cluster.
func (n *procNode) clusterView(t *testing.T) api.Cluster {
	t.Helper()
	_, body := get(t, "GET", "http://"+n.http+"/api/v1/cluster", "")
	var c api.Cluster
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("GET /api/v1/cluster on %s: %v: %s", n.name, err, body)
	}
	return c
}

// onlyInvited checks that every node lists a, b and c up and nobody
// else, and that the trunk's votes are theirs alone.
func (l *clusterProcs) onlyInvited(t *testing.T) {
	t.Helper()
	for _, n := range l.nodes {
		var names []string
		for _, m := range n.clusterView(t).Members {
			if m.Up {
				names = append(names, m.Name)
			}
		}
		if !slices.Equal(names, []string{"a", "b", "c"}) {
			t.Fatalf("%s lists %v up, want a, b and c", n.name, names)
		}
		for _, v := range n.trunk(t).Votes {
			if !slices.Contains([]string{"a", "b", "c"}, v.Node) {
				t.Fatalf("%s counts a vote of %s: %+v", n.name, v.Node, n.trunk(t).Votes)
			}
		}
	}
}

// refusals counts node n's log lines of a route refused by its
// embedded server with the peer's address, holding s.
func refusals(n *procNode, s string) int {
	count := 0
	for _, line := range strings.Split(n.out.String(), "\n") {
		if strings.Contains(line, "cluster: NATS: 127.0.0.1:") && strings.Contains(line, s) {
			count++
		}
	}
	return count
}

// TestClusterREADMECertificates: three nodes with the README's
// certificates form the cluster; a fourth `qualifyd run` with a
// certificate of another CA and one with none never join (every node
// logs their routes refused with their address, and lists and counts
// a, b and c only), and a server with the right CA's certificate but a
// wrong secret is refused too.
func TestClusterREADMECertificates(t *testing.T) {
	t.Parallel() // it waits for the refused nodes to give up, about 30 s: beside the other parallel tests
	dir := readmeCertificates(t, "a", "b", "c")
	otherCA := readmeCertificates(t, "d")
	l, routes := newTLSCluster(t, dir)
	dRoute := fmt.Sprintf("d@127.0.0.1:%d", freePort(t, "tcp"))
	other := &procNode{name: "d", sip: uint16(freePort(t, "udp")), http: fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), dir: t.TempDir()}
	writeFile(t, filepath.Join(other.dir, "d.conf"), fmt.Sprintf("[t]\ntype=aor\ncontact=%s\n%s\n", l.trunk.contact, liveOptions)+
		tlsSection(append(slices.Clone(routes), dRoute), otherCA))
	bare := &procNode{name: "d", sip: uint16(freePort(t, "udp")), http: fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), dir: t.TempDir()}
	bareRoute := fmt.Sprintf("d@127.0.0.1:%d", freePort(t, "tcp"))
	writeFile(t, filepath.Join(bare.dir, "d.conf"), fmt.Sprintf("[t]\ntype=aor\ncontact=%s\n%s\n[c]\ntype=cluster\nnodes=%s\nname=lab\nstore=cluster\n",
		l.trunk.contact, liveOptions, strings.Join(append(slices.Clone(routes), bareRoute), ",")))
	for _, d := range []*procNode{other, bare} {
		startOwn(t, d, filepath.Join(d.dir, "d.conf"))
	}
	for _, n := range l.nodes {
		eventually(t, 30*time.Second, n.name+" logs the two d's routes refused", func() bool {
			return refusals(n, "TLS route handshake error: remote error: tls: bad certificate") > 0 && // the d of another CA
				refusals(n, "TLS route handshake error: tls: first record does not look like a TLS handshake") > 0 // the d without TLS
		})
	}
	for _, d := range []*procNode{other, bare} {
		eventually(t, 2*readyBoundE2E, "d gives up joining", func() bool { return d.logged("cluster: no cluster within 30s") })
		if d.logged("cluster: joined as d") {
			t.Fatalf("a d joined:\n%s", d.out.String())
		}
	}
	l.onlyInvited(t)

	a := l.nodes[0]
	aRoute := strings.TrimPrefix(routes[0], "a@")
	pair, err := tls.LoadX509KeyPair(dir+"/c.crt", dir+"/c.key")
	if err != nil {
		t.Fatal(err)
	}
	auth := refusals(a, "authentication error")
	intruder(t, aRoute, &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, "wrong")
	eventually(t, 30*time.Second, "a logs the wrong secret refused", func() bool { return refusals(a, "authentication error") > auth })
	l.onlyInvited(t)
}

// readyBoundE2E is the daemon's wait for the cluster at start.
const readyBoundE2E = 30 * time.Second

// startOwn runs n with its own configuration file.
func startOwn(t *testing.T, n *procNode, conf string) {
	t.Helper()
	l := &clusterProcs{conf: conf}
	l.start(t, n)
}

// intruder runs a NATS server in the test that routes to route with tc
// and the secret, as the cluster "lab".
func intruder(t *testing.T, route string, tc *tls.Config, secret string) *server.Server {
	t.Helper()
	o := &server.Options{ServerName: "intruder", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "lab", Host: "127.0.0.1", Port: server.RANDOM_PORT, TLSConfig: tc, TLSTimeout: 5},
		Routes:  []*url.URL{{Scheme: "nats-route", User: url.UserPassword("qualifyd", secret), Host: route}}}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	return s
}

// TestClusterRouteRefusesHandshakeWithoutCertificate: a raw TLS
// handshake to a running node's route port without a client
// certificate is refused, and nothing comes through.
func TestClusterRouteRefusesHandshakeWithoutCertificate(t *testing.T) {
	dir := readmeCertificates(t, "a", "b", "c")
	_, routes := newTLSCluster(t, dir)
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", strings.TrimPrefix(routes[0], "a@"), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err == nil { // TLS 1.3: the server's refusal comes after the client's side of the handshake
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var buf [64]byte
		n, rerr := conn.Read(buf[:])
		if n > 0 {
			t.Fatalf("read %q without a certificate", buf[:n])
		}
		err = rerr
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("handshake without a certificate: %v, want the node's refusal (certificate required)", err)
	}
	t.Logf("refused: %v", err)
}

// certExpiry is node n's qualifyd_cluster_cert_expiry_timestamp_seconds,
// "" for none.
func (n *procNode) certExpiry(t *testing.T) string {
	t.Helper()
	_, body := get(t, "GET", "http://"+n.http+"/metrics", "")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "qualifyd_cluster_cert_expiry_timestamp_seconds "); ok {
			return v
		}
	}
	return ""
}

// TestClusterCertExpiryWarnedAndReloaded: a node whose certificate
// expires within 14 days logs it at start and exports the expiry; a
// SIGHUP after its certificate was made again for a year (the README's
// commands of one node) takes it, and the cluster stays whole.
func TestClusterCertExpiryWarnedAndReloaded(t *testing.T) {
	script := readmeCertScript(t)
	dir := t.TempDir()
	runCertificates(t, dir, strings.ReplaceAll(script, "-days 365", "-days 7"), "a", "b", "c")
	l, _ := newTLSCluster(t, dir)
	a := l.nodes[0]
	if !a.logged("cluster: this node's certificate expires at ") {
		t.Fatalf("no warning of the certificate's expiry:\n%s", a.out.String())
	}
	week := a.certExpiry(t)
	if week == "" {
		t.Fatal("no qualifyd_cluster_cert_expiry_timestamp_seconds")
	}
	_, loop, _ := strings.Cut(script, "for node in a b c; do\n")
	loop, _, _ = strings.Cut(loop, "done\n")
	cmd := exec.Command("sh", "-e", "-c", loop)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "node=a")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, peerBound, "the reloaded certificate's expiry", func() bool {
		v := a.certExpiry(t)
		return v != "" && v != week
	})
	if strings.Count(a.out.String(), "cluster: this node's certificate expires at ") != 1 {
		t.Fatalf("the certificate of a year warned of at the reload:\n%s", a.out.String())
	}
	l.onlyInvited(t)
}

// TestClusterWarnsOfInsecureRoutes: insecure_routes=yes is warned of at
// start.
func TestClusterWarnsOfInsecureRoutes(t *testing.T) {
	n := &procNode{name: "a", sip: uint16(freePort(t, "udp")), http: fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), dir: t.TempDir()}
	conf := filepath.Join(n.dir, "q.conf")
	writeFile(t, conf, fmt.Sprintf("[t]\ntype=aor\ncontact=sip:192.0.2.1\n\n[c]\ntype=cluster\nnodes=a@127.0.0.1:%d,b@127.0.0.1:%d,c@127.0.0.1:%d\nstore=cluster\ninsecure_routes=yes\n",
		freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "tcp")))
	startOwn(t, n, conf)
	eventually(t, 30*time.Second, "the warning", func() bool {
		return n.logged("cluster: insecure_routes=yes: the routes are neither encrypted nor authenticated by certificate")
	})
}

// readmeBlock is the README's first fenced block after the line that
// starts with after.
func readmeBlock(t *testing.T, after string) string {
	t.Helper()
	s := docSection(t, "docs/cluster.md", after, "## ")
	_, s, ok := strings.Cut(s, "```\n")
	s, _, ok2 := strings.Cut(s, "```")
	if !ok || !ok2 {
		t.Fatalf("no block after %q in the README", after)
	}
	return s
}

// replaceAll applies old, new pairs to s, failing the test for an old
// that s does not hold.
func replaceAll(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("the README's block has no %q:\n%s", pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

// natsServers runs three NATS servers with the README's configuration,
// on loopback, the certificates of dir (localhost's for the servers),
// and returns their client ports.
func natsServers(t *testing.T, dir string) []int {
	t.Helper()
	conf := readmeBlock(t, "JetStream API of its account. This configuration")
	var ports, routes []int
	for range 3 {
		ports, routes = append(ports, freePort(t, "tcp")), append(routes, freePort(t, "tcp"))
	}
	var servers []*server.Server
	for i := range 3 {
		var others []string
		for j := range 3 {
			if j != i {
				others = append(others, fmt.Sprintf("nats-route://127.0.0.1:%d", routes[j]))
			}
		}
		c := replaceAll(t, conf, "server_name: n1", fmt.Sprintf("server_name: n%d", i+1),
			"listen: 0.0.0.0:4222", fmt.Sprintf("listen: 127.0.0.1:%d", ports[i]),
			"listen: 0.0.0.0:6222", fmt.Sprintf("listen: 127.0.0.1:%d", routes[i]),
			"routes: [nats-route://n2.example.net:6222, nats-route://n3.example.net:6222]", "routes: ["+strings.Join(others, ", ")+"]",
			"/var/lib/nats", t.TempDir(), "/etc/nats/tls/server.", dir+"/localhost.", "/etc/nats/tls/ca.crt", dir+"/ca.crt")
		file := filepath.Join(t.TempDir(), "nats.conf")
		writeFile(t, file, c)
		o, err := server.ProcessConfigFile(file)
		if err != nil {
			t.Fatalf("the README's NATS configuration: %v\n%s", err, c)
		}
		o.NoSigs, o.NoLog = true, true
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Shutdown)
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatal("a NATS server not ready")
		}
	}
	return ports
}

// TestClusterExternalNATSAccount: three nodes on three NATS servers
// with the README's configurations (TLS with client certificates, the
// account of qualifyd's buckets, its user and password) form the
// cluster; the user can make no other bucket nor write another's keys.
func TestClusterExternalNATSAccount(t *testing.T) {
	dir := readmeCertificates(t, "a", "b", "c", "localhost")
	ports := natsServers(t, dir)
	password := filepath.Join(t.TempDir(), "nats-password")
	if err := os.WriteFile(password, []byte("s3cret-from-nats_password_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	section := replaceAll(t, readmeBlock(t, "and qualifyd's section"),
		"n1.example.net:4222", fmt.Sprintf("localhost:%d", ports[0]), "n2.example.net:4222", fmt.Sprintf("localhost:%d", ports[1]),
		"n3.example.net:4222", fmt.Sprintf("localhost:%d", ports[2]),
		"/etc/qualifyd/tls/", dir+"/", "/etc/qualifyd/nats-password", password)
	l := newTrunkLab(t)
	writeFile(t, l.conf, fmt.Sprintf("[t]\ntype=aor\ncontact=%s\n%s\n", l.trunk.contact, liveOptions)+section+
		fmt.Sprintf("member_ttl=%d\nlease_ttl=%d\n", clusterTTLs, clusterTTLs))
	for _, n := range l.nodes {
		l.start(t, n)
	}
	for _, n := range l.nodes {
		eventually(t, 30*time.Second, n.name+" joined", func() bool { return n.logged("cluster: joined as " + n.name) })
	}
	l.clusterSays(t, "Reachable", 30*time.Second, l.leader(t, nil))
	l.onlyInvited(t)
	confined(t, dir, ports[0])
}

// confined checks that qualifyd's NATS user may make no bucket but its
// four, nor write a key outside them.
func confined(t *testing.T, dir string, port int) {
	t.Helper()
	errs := make(chan error, 16)
	nc, err := nats.Connect(fmt.Sprintf("tls://localhost:%d", port), nats.RootCAs(dir+"/ca.crt"), nats.ClientCert(dir+"/a.crt", dir+"/a.key"),
		nats.UserInfo("qualifyd", "s3cret-from-nats_password_file"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "other", Replicas: 3}); err == nil {
		t.Fatal("qualifyd's user made a fifth bucket")
	} else {
		t.Logf("a fifth bucket: %v", err)
	}
	if err := nc.Publish("$KV.other.k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation") {
			t.Fatalf("publish outside the buckets: %v, want a permissions violation", err)
		}
	case <-ctx.Done():
		t.Fatal("publish outside the buckets: no permissions violation")
	}
}
