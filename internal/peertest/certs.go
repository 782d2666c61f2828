package peertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are PEM files in a directory of the test's (WriteCerts): a CA,
// a server certificate it signed for 127.0.0.1 and localhost, and a
// client certificate it signed for CN "qualifyd".
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// WriteCerts makes a CA and the certificates it signs, valid for an
// hour, in a new directory.
func WriteCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert := newKey(t), &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "qualifyd test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER := sign(t, caCert, caCert, caKey, caKey)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	c := Certs{CA: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	for i, leaf := range []struct {
		name       string
		usage      x509.ExtKeyUsage
		cert, key  *string
		ips, hosts bool
	}{
		{"server", x509.ExtKeyUsageServerAuth, &c.ServerCert, &c.ServerKey, true, true},
		{"qualifyd", x509.ExtKeyUsageClientAuth, &c.ClientCert, &c.ClientKey, false, false},
	} {
		key := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: leaf.name},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{leaf.usage}}
		if leaf.ips {
			tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
		}
		*leaf.cert = writePEM(t, dir, leaf.name+".pem", "CERTIFICATE", sign(t, tmpl, ca, key, caKey))
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		*leaf.key = writePEM(t, dir, leaf.name+"-key.pem", "PRIVATE KEY", der)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
