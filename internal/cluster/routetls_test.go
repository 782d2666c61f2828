package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// lines keeps the ServerLog hook's lines.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	l.l = append(l.l, s)
	l.mu.Unlock()
}

// count counts the lines holding every one of subs.
func (l *lines) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.l {
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(s, sub)
		}
		if ok {
			n++
		}
	}
	return n
}

// secureCluster starts nodes a, b and c on loopback with mutual TLS from
// a CA of dir and the secret, and waits until each sees the three up. It
// returns the nodes' Clusters and node a's server log.
func secureCluster(t *testing.T, dir string) ([]*Cluster, *lines) {
	t.Helper()
	routes := freePorts(t, 3)
	var nodes []Node
	for i, r := range routes {
		nodes = append(nodes, Node{Name: string(rune('a' + i)), Route: r})
	}
	logA := &lines{}
	var cs []*Cluster
	for i, nd := range nodes {
		cfg := Config{Nodes: nodes, Store: t.TempDir(), MemberTTL: testTTL, LeaseTTL: testTTL,
			Secure: Secure{TLSCert: dir + "/{node}.crt", TLSKey: dir + "/{node}.key", TLSCA: dir + "/ca.crt", SecretFile: dir + "/secret"}}
		if err := cfg.Finish(nd.Name); err != nil {
			t.Fatal(err)
		}
		hooks := Hooks{}
		if i == 0 {
			hooks.ServerLog = logA.add
		}
		c, err := New(cfg, hooks)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		cs = append(cs, c)
	}
	for _, c := range cs {
		waitFor(t, 30*time.Second, c.cfg.Self+" sees a, b and c up", func() bool { return upCount(c.View()) == 3 })
	}
	return cs, logA
}

// intruder starts a NATS server that routes to route with tc and the
// secret, in the cluster named name.
func intruder(t *testing.T, name, route string, tc *tls.Config, secret string) *server.Server {
	t.Helper()
	o := &server.Options{ServerName: "intruder", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: server.RANDOM_PORT, TLSConfig: tc, TLSTimeout: routeTLSTimeout.Seconds()},
		Routes:  []*url.URL{{Scheme: "nats-route", User: url.UserPassword(routeUser, secret), Host: route}}}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	return s
}

// clientTLS is an intruder's TLS: the certificate of dir/name, or none
// for "".
func clientTLS(t *testing.T, dir, name string) *tls.Config {
	t.Helper()
	tc := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if name != "" {
		pair, err := tls.LoadX509KeyPair(dir+"/"+name+".crt", dir+"/"+name+".key")
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc
}

// TestRoutesRefuseTheUninvited: three nodes with mutual TLS form the
// cluster; a server with a certificate of another CA, one with none, one
// whose certificate names no node, and one with the right certificate
// but a wrong secret or another cluster's name are each refused by node a, which logs it with the
// address; none of them gets a route, and the members stay the three.
func TestRoutesRefuseTheUninvited(t *testing.T) {
	dir, ca := tlsDir(t)
	ca.issueNow(t, "c")
	other := newTestCA(t, t.TempDir())
	other.issueNow(t, "c")
	cs, logA := secureCluster(t, dir)
	a := cs[0]
	tests := []struct {
		name    string
		tc      *tls.Config
		secret  string
		cluster string
		logged  []string
	}{
		{"another CA", clientTLS(t, other.dir, "c"), "s3cret", "", []string{"TLS route handshake error", "certificate signed by unknown authority"}},
		{"no certificate", clientTLS(t, dir, ""), "s3cret", "", []string{"TLS route handshake error", "client didn't provide a certificate"}},
		{"a name not in nodes=", clientTLS(t, dir, "x"), "s3cret", "", []string{"TLS route handshake error", "names [x], none of them a node of nodes= (a,b,c)"}},
		{"a wrong secret", clientTLS(t, dir, "c"), "wrong", "", []string{"authentication error"}},
		{"another cluster's name", clientTLS(t, dir, "c"), "s3cret", "qualifyd-other", []string{"does not match"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := logA.count(tt.logged...)
			s := intruder(t, cmp.Or(tt.cluster, a.cfg.Name), a.cfg.Nodes[0].Route, tt.tc, tt.secret)
			waitFor(t, 30*time.Second, "node a logs the refusal", func() bool { return logA.count(append(tt.logged, "127.0.0.1:")...) > before })
			// The intruder may count its route until a's close reaches it
			// (after a TLS handshake that succeeded, as with a wrong
			// secret); a's side, below, never lists it.
			waitFor(t, 10*time.Second, "the intruder has no route", func() bool { return s.NumRoutes() == 0 })
			rz, err := a.server().Routez(&server.RoutezOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rz.Routes {
				if r.RemoteName == "intruder" || r.RemoteID == s.ID() {
					t.Fatalf("node a has a route to the intruder: %+v", r)
				}
			}
			if v := a.View(); upCount(v) != 3 || len(v.Members) != 3 {
				t.Fatalf("members %+v, want a, b and c up", v.Members)
			}
		})
	}
}

// TestRouteHandshakeWithoutCertificate: a raw TLS handshake to a route
// port without a client certificate gets nothing but the refusal.
func TestRouteHandshakeWithoutCertificate(t *testing.T) {
	dir, _ := tlsDir(t)
	ca := newTestCA(t, dir) // overwrites ca.crt: a CA of its own
	ca.issueNow(t, "a", "b", "c")
	cs, _ := secureCluster(t, dir)
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", cs[0].cfg.Nodes[0].Route, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err == nil { // TLS 1.3: the server's refusal of the client comes after the client's side is done
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var buf [64]byte
		var n int
		n, err = conn.Read(buf[:])
		if n > 0 {
			t.Fatalf("read %q through TLS without a certificate", buf[:n])
		}
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("handshake without a certificate: %v, want the server's refusal", err)
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("%v, want a TLS certificate required alert", err)
	}
}

// routeCert dials node c's route port as node b and returns the
// certificate it presents.
func routeCert(t *testing.T, c *Cluster, dir string) string {
	t.Helper()
	tc := clientTLS(t, dir, "b")
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", c.cfg.Nodes[c.cfg.index(c.cfg.Self)].Route, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestReloadRotatesTheCertificate: after Reload, the next handshake
// presents the new certificate; a reload that fails keeps the old one.
func TestReloadRotatesTheCertificate(t *testing.T) {
	dir, ca := tlsDir(t)
	ca.issueNow(t, "c")
	cs, _ := secureCluster(t, dir)
	a := cs[0]
	old := routeCert(t, a, dir)
	ca.issueNow(t, "a")
	if got := routeCert(t, a, dir); got != old {
		t.Fatalf("before the reload node a presents %s, want the certificate it started with, %s", got, old)
	}
	expiry, err := a.Reload()
	if err != nil || !expiry.Equal(a.CertExpiry()) {
		t.Fatalf("Reload = %v, %v", expiry, err)
	}
	rotated := routeCert(t, a, dir)
	if rotated == old {
		t.Fatalf("after the reload node a still presents %s", old)
	}
	write(t, dir+"/a.key", "garbage\n", 0o600)
	if _, err := a.Reload(); err == nil || !strings.Contains(err.Error(), "a.key") {
		t.Fatalf("Reload with a broken key = %v, want its error", err)
	}
	if got := routeCert(t, a, dir); got != rotated {
		t.Fatalf("after a failed reload node a presents %s, want %s", got, rotated)
	}
	waitFor(t, 30*time.Second, "a, b and c still up", func() bool { return upCount(a.View()) == 3 })
}
