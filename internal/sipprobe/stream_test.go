package sipprobe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestTCPReusesConnection: probes share one connection; when the peer
// closes it, the next probe reconnects.
func TestTCPReusesConnection(t *testing.T) {
	r := newStreamResponder(t, nil, func(x *exchange) {
		x.reply(200)
		if x.req.Recipient.User == "close" {
			_ = x.conn.Close()
		}
	})
	p := newProber(t, Config{})
	for i := range 3 {
		res := p.Probe(t.Context(), target(uriOf(r, ";transport=tcp"), 3*time.Second))
		if res.Code != 200 || res.Addr() != "tcp "+r.addr.String() {
			t.Fatalf("probe %d: got %+v", i, res)
		}
	}
	if n := r.connections(); n != 1 {
		t.Errorf("%d connections for 3 probes, want 1", n)
	}
	if via := r.next(t).Via(); via.Transport != "TCP" {
		t.Errorf("Via transport %q", via.Transport)
	}
	res := p.Probe(t.Context(), target("sip:close@"+r.addr.String()+";transport=tcp", 3*time.Second))
	if res.Code != 200 {
		t.Fatalf("got %+v", res)
	}
	// The close may race the next write; a transport failure is allowed
	// once, then the prober must have reconnected.
	tg := target(uriOf(r, ";transport=tcp"), 3*time.Second)
	if res = p.Probe(t.Context(), tg); res.Reason == qualify.ReasonTransport {
		res = p.Probe(t.Context(), tg)
	}
	if res.Code != 200 || r.connections() != 2 {
		t.Fatalf("after close: got %+v with %d connections, want 200 on a second one", res, r.connections())
	}
}

// TestTCPNoRetransmission: over TCP a silent peer gets one request only
// (docs/qualify-semantics.md §3.2).
func TestTCPNoRetransmission(t *testing.T) {
	r := newStreamResponder(t, nil, nil)
	p := newProber(t, Config{})
	tg := target(uriOf(r, ""), 1600*time.Millisecond)
	tg.Options = &probe.Options{Transport: "tcp"}
	if res := p.Probe(t.Context(), tg); res.Reason != qualify.ReasonTimeout {
		t.Fatalf("got %+v, want timeout", res)
	}
	if s := p.Stats(); s.Retransmissions != 0 || s.Probes != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestTCPRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target("sip:x@"+addr+";transport=tcp", 3*time.Second))
	if res.Reason != qualify.ReasonTransport || !strings.Contains(res.Detail, "refused") || !res.Sent.IsZero() {
		t.Fatalf("got %+v, want transport (refused)", res)
	}
	if s := p.Stats(); s.TransportErrors != 1 || s.Probes != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestTCPPeerCloses: a connection closed with a probe in flight fails it
// with reason transport at once.
func TestTCPPeerCloses(t *testing.T) {
	r := newStreamResponder(t, nil, func(x *exchange) { _ = x.conn.Close() })
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target(uriOf(r, ";transport=tcp"), time.Hour))
	if res.Reason != qualify.ReasonTransport {
		t.Fatalf("got %+v, want transport", res)
	}
}

func TestTLS(t *testing.T) {
	ca, pool := newCA(t)
	good := newStreamResponder(t, ca.serverConfig(t, "127.0.0.1"), func(x *exchange) { x.reply(200) })
	wrong := newStreamResponder(t, ca.serverConfig(t, "other.example"), func(x *exchange) { x.reply(200) })
	p := newProber(t, Config{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	res := p.Probe(t.Context(), target("sips:pbx@"+good.addr.String(), 3*time.Second))
	if res.Code != 200 || res.Addr() != "tls "+good.addr.String() {
		t.Fatalf("good certificate: got %+v", res)
	}
	if via := good.next(t).Via(); via.Transport != "TLS" {
		t.Errorf("Via transport %q", via.Transport)
	}
	res = p.Probe(t.Context(), target("sip:pbx@"+wrong.addr.String()+";transport=tls", 3*time.Second))
	if res.Reason != qualify.ReasonTransport || !strings.Contains(res.Detail, "certificate") {
		t.Fatalf("wrong name: got %+v, want transport (certificate)", res)
	}
	untrusted := newProber(t, Config{})
	res = untrusted.Probe(t.Context(), target("sips:pbx@"+good.addr.String(), 3*time.Second))
	if res.Reason != qualify.ReasonTransport {
		t.Fatalf("unknown CA: got %+v, want transport", res)
	}
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) (*testCA, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "qualifyd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key}, pool
}

// serverConfig issues a leaf certificate for name (an IP or DNS name).
func (ca *testCA) serverConfig(t *testing.T, name string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestTCPOversized: a response larger than MaxMessageSize is dropped and
// counted; a stream cannot be resynchronised after it, so the connection
// is closed and the probe fails with reason transport.
func TestTCPOversized(t *testing.T) {
	for name, pad := range map[string]string{"long line": strings.Repeat("x", 9000), "many lines": strings.Repeat("x\r\nX-Pad: ", 2000)} {
		t.Run(name, func(t *testing.T) {
			r := newStreamResponder(t, nil, func(x *exchange) {
				x.reply(200, func(res *sip.Response) { res.AppendHeader(sip.NewHeader("X-Pad", pad)) })
			})
			p := newProber(t, Config{})
			res := p.Probe(t.Context(), target(uriOf(r, ";transport=tcp"), 3*time.Second))
			if res.Reason != qualify.ReasonTransport || p.Stats().DroppedOversized != 1 {
				t.Fatalf("got %+v, stats %+v", res, p.Stats())
			}
		})
	}
}
