package sipprobe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// asterisk is a pjsip TLS transport's profile: Asterisk's defaults
// (verify_server=no, method unset: TLS 1.0 only) changed by set.
func asterisk(id string, set func(p *probe.TLS)) *probe.TLS {
	p := &probe.TLS{TLSSettings: probe.TLSSettings{Transport: id}, ID: id, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10}
	if set != nil {
		set(p)
	}
	return p
}

// verified is asterisk with verify_server=yes, roots and method=sslv23.
func verified(roots *x509.CertPool) func(p *probe.TLS) {
	return func(p *probe.TLS) { p.VerifyServer, p.Roots, p.MaxVersion = true, roots, tls.VersionTLS13 }
}

// clientCert issues a client certificate.
func (ca *testCA) clientCert(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "qualifyd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// cnOnly issues a server certificate that names host in its common name
// alone, as pjproject still matches and crypto/tls no longer does.
func (ca *testCA) cnOnly(t *testing.T, host string) *tls.Config {
	t.Helper()
	cfg := ca.serverConfig(t, "placeholder.invalid")
	key := cfg.Certificates[0].PrivateKey.(*ecdsa.PrivateKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(4), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestTLSTransportProfile: a probe through a pjsip TLS transport trusts
// what the transport does, a peer on loopback with a certificate of a
// private CA: verified against ca_list_file with verify_server=yes,
// refused without a CA list, not checked at all with verify_server=no
// (Asterisk's default); its client certificate presented to a peer
// that requires one; method pins the TLS version.
func TestTLSTransportProfile(t *testing.T) {
	ca, pool := newCA(t)
	private := func(min uint16, set func(c *tls.Config)) *tls.Config {
		c := ca.serverConfig(t, "127.0.0.1")
		c.MinVersion = min
		if set != nil {
			set(c)
		}
		return c
	}
	// TLS 1.2, where a refused client certificate fails the handshake,
	// not the first read.
	requireClient := func(c *tls.Config) {
		c.ClientAuth, c.ClientCAs, c.MaxVersion = tls.RequireAndVerifyClientCert, pool, tls.VersionTLS12
	}
	only13 := func(c *tls.Config) { c.MaxVersion = tls.VersionTLS13 }
	tests := []struct {
		name    string
		server  *tls.Config
		profile *probe.TLS
		detail  string // "" for a 200
	}{
		{"verify_server=yes, ca_list_file the private CA", private(tls.VersionTLS12, nil), asterisk("ca", verified(pool)), ""},
		{"verify_server=yes without a CA list", private(tls.VersionTLS12, nil), asterisk("none", verified(nil)), "tls: x509: certificate signed by unknown authority"},
		{"verify_server=no (the default), TLS 1.0 as pjproject's default method", private(tls.VersionTLS10, nil), asterisk("default", nil), ""},
		{"verify_server=no ignores the name", ca.serverConfig(t, "other.example"), asterisk("sslv23", func(p *probe.TLS) { p.MaxVersion = tls.VersionTLS13 }), ""},
		{"verify_server=yes checks the name", ca.serverConfig(t, "other.example"), asterisk("ca", verified(pool)), "tls: x509: certificate is not valid for 127.0.0.1 (names other.example, other.example;"},
		{"verify_server=yes matches the common name, as pjproject", ca.cnOnly(t, "127.0.0.1"), asterisk("ca", verified(pool)), ""},
		{"client certificate required and presented", private(tls.VersionTLS12, requireClient),
			asterisk("client", func(p *probe.TLS) { p.Certificate, p.MaxVersion = ca.clientCert(t), tls.VersionTLS13 }), ""},
		{"client certificate required, none configured", private(tls.VersionTLS12, requireClient), asterisk("sslv23", func(p *probe.TLS) { p.MaxVersion = tls.VersionTLS13 }), "tls: remote error: tls: "},
		{"method=tlsv1_2 against a TLS 1.3 server", private(tls.VersionTLS13, only13),
			asterisk("tlsv1_2", func(p *probe.TLS) { p.MinVersion, p.MaxVersion = tls.VersionTLS12, tls.VersionTLS12 }), "tls: remote error: tls: protocol version not supported"},
		{"method=tlsv1_3 against a TLS 1.3 server", private(tls.VersionTLS13, only13),
			asterisk("tlsv1_3", func(p *probe.TLS) { p.MinVersion, p.MaxVersion = tls.VersionTLS13, tls.VersionTLS13 }), ""},
		{"the default method against a TLS 1.2 server", private(tls.VersionTLS12, nil), asterisk("default", nil), "tls: remote error: tls: protocol version not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newStreamResponder(t, tt.server, func(x *exchange) { x.reply(200) })
			p := newProber(t, Config{})
			tg := target("sips:pbx@"+r.addr.String(), 3*time.Second)
			tg.Options = &probe.Options{TLS: tt.profile}
			res := p.Probe(t.Context(), tg)
			if tt.detail == "" && res.Code != 200 {
				t.Fatalf("got %+v, want 200", res)
			}
			if tt.detail != "" && (res.Reason != qualify.ReasonTransport || !strings.HasPrefix(res.Detail, tt.detail)) {
				t.Fatalf("got %+v, want transport %q", res, tt.detail)
			}
		})
	}
}

// TestTLSProfilesDoNotShare: two transports of different trust to one
// address dial a connection each; one profile ID shares one, as a reload
// reads a transport into a new profile of the same ID.
func TestTLSProfilesDoNotShare(t *testing.T) {
	ca, _ := newCA(t)
	r := newStreamResponder(t, ca.serverConfig(t, "127.0.0.1"), func(x *exchange) { x.reply(200) })
	p := newProber(t, Config{})
	probeWith := func(prof *probe.TLS) qualify.Result {
		tg := target("sips:pbx@"+r.addr.String(), 3*time.Second)
		tg.Options = &probe.Options{TLS: prof}
		return p.Probe(t.Context(), tg)
	}
	sslv23 := func(p *probe.TLS) { p.MaxVersion = tls.VersionTLS13 }
	if res := probeWith(asterisk("open", sslv23)); res.Code != 200 {
		t.Fatalf("verify_server=no: got %+v", res)
	}
	if res := probeWith(asterisk("strict", verified(nil))); res.Reason != qualify.ReasonTransport {
		t.Fatalf("verify_server=yes without CAs on the same address: got %+v, want transport (its own connection)", res)
	}
	if res := probeWith(asterisk("open", sslv23)); res.Code != 200 || r.connections() != 2 {
		t.Fatalf("a new profile of the first one's ID: got %+v with %d connections, want 200 on the first", res, r.connections())
	}
}

// TestNameMatches: pjproject's exact match, and Asterisk's one-label
// wildcard with allow_wildcard_certs.
func TestNameMatches(t *testing.T) {
	tests := []struct {
		host, cert string
		wildcard   bool
		want       bool
	}{
		{"sbc.example.com", "SBC.example.com", false, true},
		{"sbc.example.com", "*.example.com", false, false},
		{"sbc.example.com", "*.example.com", true, true},
		{"a.sbc.example.com", "*.example.com", true, false},
		{"example.com", "*.example.com", true, false},
		{"192.0.2.1", "192.0.2.1", false, true},
	}
	for _, tt := range tests {
		if got := nameMatches(tt.host, tt.cert, tt.wildcard); got != tt.want {
			t.Errorf("nameMatches(%q, %q, %v) = %v, want %v", tt.host, tt.cert, tt.wildcard, got, tt.want)
		}
	}
}
