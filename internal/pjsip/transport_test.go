package pjsip

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// tlsFixtures are PEM files for the transport tests: a CA, a client
// certificate and its key (plain and encrypted with "s3cret"), and a
// key of another certificate.
func tlsFixtures(t *testing.T) map[string]string {
	t.Helper()
	caKey, ca := newTestKey(t), &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key := newTestKey(t)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "qualifyd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	enc := encryptedKey(t, keyDER)
	otherDER, err := x509.MarshalECPrivateKey(newTestKey(t))
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return map[string]string{
		"ca.pem": pemOf("CERTIFICATE", caDER), "cas/0a1b2c3d.0": pemOf("CERTIFICATE", caDER), "cas/README": "not a certificate\n",
		"client.pem": pemOf("CERTIFICATE", leafDER), "client.key": pemOf("EC PRIVATE KEY", keyDER),
		"client-enc.key": string(pem.EncodeToMemory(enc)), "other.key": pemOf("EC PRIVATE KEY", otherDER),
		"pkcs8-enc.key": pemOf("ENCRYPTED PRIVATE KEY", []byte{1, 2, 3}), "empty/x": "",
	}
}

func newTestKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tlsConf is a TLS transport t with opts, one a line from line 3, and an
// AoR a whose endpoint goes through t.
func tlsConf(opts ...string) string {
	return "[t]\ntype=transport\n" + strings.Join(append(opts, "protocol=tls"), "\n") +
		"\n[a]\ntype=aor\ncontact=sip:a@192.0.2.1;transport=tls\n[a]\ntype=endpoint\naors=a\ntransport=t\n"
}

// TestTLSProfile: a TLS transport's options become the profile of the
// probes through it, Asterisk's defaults where unset.
func TestTLSProfile(t *testing.T) {
	v10, v12, v13 := uint16(tls.VersionTLS10), uint16(tls.VersionTLS12), uint16(tls.VersionTLS13)
	tests := []struct {
		name       string
		opts       []string
		want       probe.TLSSettings
		min, max   uint16
		roots, crt bool
	}{
		{"defaults: no verification, TLS 1.0 only", nil, probe.TLSSettings{Transport: "t"}, v10, v10, false, false},
		{"every option", []string{"ca_list_file=/ca.pem", "verify_server=yes", "allow_wildcard_certs=yes", "cert_file=/client.pem", "priv_key_file=/client.key", "method=TLSv1_2", "verify_client=yes", "cipher=ECDHE-RSA-AES128-GCM-SHA256"},
			probe.TLSSettings{Transport: "t", CAFile: "/ca.pem", VerifyServer: true, AllowWildcardCerts: true, CertFile: "/client.pem", KeyFile: "/client.key", Method: "tlsv1_2"}, v12, v12, true, true},
		{"CA directory, relative to the configuration", []string{"ca_list_path=cas", "verify_server=yes"},
			probe.TLSSettings{Transport: "t", CAPath: "cas", VerifyServer: true}, v10, v10, true, false},
		{"sslv23 allows every version", []string{"method=sslv23"}, probe.TLSSettings{Transport: "t", Method: "sslv23"}, v10, v13, false, false},
		{"tlsv1_3", []string{"method=tlsv1_3"}, probe.TLSSettings{Transport: "t", Method: "tlsv1_3"}, v13, v13, false, false},
		{"sslv3 allows what no handshake speaks", []string{"method=sslv3"}, probe.TLSSettings{Transport: "t", Method: "sslv3"}, 0x300, 0x300, false, false},
		{"encrypted key with its password", []string{"cert_file=/client.pem", "priv_key_file=/client-enc.key", "password=s3cret"},
			probe.TLSSettings{Transport: "t", CertFile: "/client.pem", KeyFile: "/client-enc.key"}, v10, v10, false, true},
		{"a certificate without its key presents none", []string{"cert_file=/client.pem"},
			probe.TLSSettings{Transport: "t", CertFile: "/client.pem"}, v10, v10, false, false},
		{"empty file options are unset", []string{"ca_list_file=", "cert_file="}, probe.TLSSettings{Transport: "t"}, v10, v10, false, false},
	}
	files := tlsFixtures(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFiles(tlsConf(tt.opts...), files)
			if err != nil {
				t.Fatal(err)
			}
			p := cfg.AoRs[0].OptionsValue().TLS
			if p == nil || len(cfg.TLS) != 1 || cfg.TLS[0] != p {
				t.Fatalf("AoR's profile %v, configuration's %v: want the transport's", p, cfg.TLS)
			}
			if p.TLSSettings != tt.want || p.MinVersion != tt.min || p.MaxVersion != tt.max ||
				(p.Roots != nil) != tt.roots || (p.Certificate != nil) != tt.crt || len(p.ID) != 32 {
				t.Errorf("got %+v versions %#x-%#x roots %v certificate %v ID %q\nwant %+v versions %#x-%#x roots %v certificate %v",
					p.TLSSettings, p.MinVersion, p.MaxVersion, p.Roots != nil, p.Certificate != nil, p.ID, tt.want, tt.min, tt.max, tt.roots, tt.crt)
			}
		})
	}
}

// TestTLSProfileErrors: a file that is missing or holds no certificate
// or key, and a bad value, are errors at the option's line.
func TestTLSProfileErrors(t *testing.T) {
	tests := []struct {
		name, opt string
		line      int
		want      string
	}{
		{"missing CA file", "ca_list_file=/none.pem", 3, `option "ca_list_file": invalid value: file /none.pem: open: file does not exist`},
		{"CA file without a certificate", "ca_list_file=/client.key", 3, `option "ca_list_file": invalid value: file /client.key: no PEM certificate in it`},
		{"missing CA directory", "ca_list_path=/nodir", 3, `option "ca_list_path": invalid value: file /nodir: open: file does not exist`},
		{"CA directory without a certificate", "ca_list_path=/empty", 3, `option "ca_list_path": invalid value: directory /empty: no file with a PEM certificate in it`},
		{"missing certificate", "cert_file=/none.pem\npriv_key_file=/client.key", 3, `option "cert_file": invalid value: file /none.pem: open: file does not exist`},
		{"key of another certificate", "cert_file=/client.pem\npriv_key_file=/other.key", 4, `option "priv_key_file": invalid value: file /other.key: not the key of /client.pem's certificate: tls: private key does not match public key`},
		{"wrong password", "cert_file=/client.pem\npriv_key_file=/client-enc.key\npassword=nope", 4, `option "priv_key_file": invalid value: file /client-enc.key: cannot decrypt the key with password: x509: decryption password incorrect`},
		{"encrypted PKCS #8 key", "cert_file=/client.pem\npriv_key_file=/pkcs8-enc.key", 4, `option "priv_key_file": invalid value: file /pkcs8-enc.key: an encrypted PKCS #8 key, which qualifyd cannot decrypt (openssl pkey -in it -out a file only qualifyd and Asterisk may read)`},
		{"bad method", "method=tlsv2", 3, `option "method": invalid value: "tlsv2" is not a TLS method (default, unspecified, tlsv1, tlsv1_1, tlsv1_2, tlsv1_3, sslv2, sslv3 or sslv23)`},
		{"bad verify_server", "verify_server=maybe", 3, `option "verify_server": invalid value: "maybe" is not a boolean (yes or no)`},
	}
	files := tlsFixtures(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFiles(tlsConf(tt.opt), files)
			want := fmt.Sprintf(`pjsip.conf:%d: section "t": %s`, tt.line, tt.want)
			if err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
				t.Fatalf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// deniedFS refuses to open one file, as a key only Asterisk may read.
type deniedFS struct {
	fstest.MapFS
	name string
}

func (d deniedFS) Open(name string) (fs.File, error) {
	if name == d.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.MapFS.Open(name)
}

// TestTLSKeyUnreadable: a key qualifyd may not read is a warning, and
// the probes present no certificate.
func TestTLSKeyUnreadable(t *testing.T) {
	fsys := fstest.MapFS{}
	for name, body := range tlsFixtures(t) {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	cfg, err := Parse("pjsip.conf", []byte(tlsConf("cert_file=/client.pem", "priv_key_file=/client.key")), Options{FS: deniedFS{fsys, "client.key"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `pjsip.conf:4: section "t": option "priv_key_file": cannot read: file /client.key: permission denied: probes over this transport present no client certificate (give qualifyd a group that may read it, as SupplementaryGroups=asterisk)`
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].Error() != want || !errors.Is(cfg.Warnings[0], ErrUnreadable) {
		t.Fatalf("warnings %v, want %s", cfg.Warnings, want)
	}
	if p := cfg.TLS[0]; p.Certificate != nil || !p.KeyUnreadable {
		t.Fatalf("profile %+v, want no certificate and the key noted unreadable", p)
	}
}

// TestTLSProfileOfEndpoint: a probe goes with its endpoint's TLS
// transport; without one of its own (no endpoint, no transport=, or one
// not defined) with the first TLS transport's, as pjproject takes the
// first TLS listener; through a transport of another protocol with none.
func TestTLSProfileOfEndpoint(t *testing.T) {
	src := "[u]\ntype=transport\nprotocol=udp\n[t1]\ntype=transport\nprotocol=tls\n[t2]\ntype=transport\nprotocol=tls\nverify_server=yes\n" +
		"[own]\ntype=aor\n[own]\ntype=endpoint\naors=own\ntransport=t2\n" +
		"[none]\ntype=aor\n[none]\ntype=endpoint\naors=none\n" +
		"[undefined]\ntype=aor\n[undefined]\ntype=endpoint\naors=undefined\ntransport=x\n" +
		"[udp]\ntype=aor\n[udp]\ntype=endpoint\naors=udp\ntransport=u\n" +
		"[alone]\ntype=aor\n"
	cfg, err := parseFiles(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"own": "t2", "none": "t1", "undefined": "t1", "udp": "", "alone": "t1"}
	for _, a := range cfg.AoRs {
		got := a.OptionsValue().TLS.Settings().Transport
		if got != want[a.Name] {
			t.Errorf("AoR %s: profile of transport %q, want %q", a.Name, got, want[a.Name])
		}
	}
	cfg, err = parseFiles(src+"[t1]\ntype=transport\nprotocol=tls\n", nil)
	if err != nil || len(cfg.TLS) != 0 || cfg.AoRs[0].OptionsValue().TLS != nil {
		t.Fatalf("with a second transport of one name Asterisk loads none: err %v, profiles %v", err, cfg.TLS)
	}
}

// TestTLSProfileID: the ID follows the settings and the files' contents,
// not the transport's name; Options.Equal follows the settings.
func TestTLSProfileID(t *testing.T) {
	files := tlsFixtures(t)
	load := func(src string, files map[string]string) *probe.TLS {
		t.Helper()
		cfg, err := parseFiles(src, files)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.TLS[0]
	}
	conf := "[t]\ntype=transport\nprotocol=tls\nca_list_file=/ca.pem\n"
	a, b := load(conf, files), load(conf, files)
	renamed := load(strings.Replace(conf, "[t]", "[r]", 1), files)
	changed := map[string]string{"ca.pem": files["ca.pem"] + files["client.pem"]}
	rotated := load(conf, changed)
	if a == b || a.ID != b.ID || renamed.ID != a.ID || rotated.ID == a.ID {
		t.Errorf("IDs: %s, again %s, renamed %s, CA file changed %s", a.ID, b.ID, renamed.ID, rotated.ID)
	}
	x, y, z := probe.Options{TLS: a}, probe.Options{TLS: rotated}, probe.Options{TLS: renamed}
	if !x.Equal(&y) || x.Equal(&z) || x.Equal(&probe.Options{}) {
		t.Errorf("Equal: same settings %v, renamed %v, none %v", x.Equal(&y), x.Equal(&z), x.Equal(&probe.Options{}))
	}
}

// encryptedKey returns keyDER in OpenSSL's legacy PEM encryption with
// the password s3cret, of a random IV that the wrong password "nope"
// is told from: the format checks only the padding, so one IV in about
// 256 decrypts with any password to padding that looks right, and the
// reader then fails on the key itself instead.
func encryptedKey(t *testing.T, keyDER []byte) *pem.Block {
	t.Helper()
	for {
		//lint:ignore SA1019 OpenSSL's legacy PEM encryption, which the reader must read
		enc, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", keyDER, []byte("s3cret"), x509.PEMCipherAES256)
		if err != nil {
			t.Fatal(err)
		}
		//lint:ignore SA1019 as above
		if _, err := x509.DecryptPEMBlock(enc, []byte("nope")); errors.Is(err, x509.IncorrectPasswordError) {
			return enc
		}
	}
}
