package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA is a CA the tests make, and the directory its files go to.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

// newTestCA makes a CA and writes its certificate to dir/ca.crt.
func newTestCA(t testing.TB, dir string) *testCA {
	t.Helper()
	key := genKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, dir: dir}
}

// issue writes dir/name.crt and dir/name.key, a certificate for the DNS
// name name valid from notBefore to notAfter.
func (ca *testCA) issue(t testing.TB, name string, notBefore, notAfter time.Time) {
	t.Helper()
	key := genKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: notBefore, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(ca.dir, name+".crt"), "CERTIFICATE", der)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(ca.dir, name+".key"), "PRIVATE KEY", kder)
}

// issueNow is issue valid from an hour ago to a day from now.
func (ca *testCA) issueNow(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		ca.issue(t, n, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	}
}

// genKey makes a P-256 key.
func genKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// writePEM writes one PEM block to path, mode 0600.
func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
