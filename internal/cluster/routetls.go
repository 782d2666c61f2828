package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// routeTLS is the embedded server's TLS configuration of its routes, in
// and out: each side presents the node's certificate (tls_cert) and
// checks the peer's with verifyPeer. The certificate, key and CA are
// taken from cur at each handshake, so that a reload rotates them.
//
// Go's own verification is off on the dialling side only because it
// would check the peer's certificate against the route's host (an
// address); verifyPeer checks the chain against tls_ca on both sides,
// and the name against nodes= instead.
func routeTLS(cur func() *files, names []string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ClientAuth:         tls.RequireAnyClientCert,
		InsecureSkipVerify: true,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return cur().cert, nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cur().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return verifyPeer(cs, cur().pool, names) },
	}
}

// verifyPeer checks that the peer's certificate chains to pool and names
// one of the nodes in its subjectAltName DNS names.
func verifyPeer(cs tls.ConnectionState, pool *x509.CertPool, names []string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("cluster: the peer sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("cluster: the peer's certificate (%s): %w", leaf.Subject, err)
	}
	for _, n := range leaf.DNSNames {
		if slices.Contains(names, n) {
			return nil
		}
	}
	return fmt.Errorf("cluster: the peer's certificate names %v, none of them a node of nodes= (%s)", leaf.DNSNames, strings.Join(names, ","))
}

// serverLog hands the embedded server's errors to a function, one line
// each (the peer's address first when it is about a connection); its
// warnings (snapshots, elections, the dialling side's unverified route
// TLS, which verifyPeer checks instead), notices, debug and trace lines
// are dropped: the daemon logs the cluster's state itself.
type serverLog struct{ logf func(string) }

// Noticef drops a notice.
func (serverLog) Noticef(string, ...any) {}

// Warnf drops a warning.
func (serverLog) Warnf(string, ...any) {}

// Fatalf logs a fatal error (the server stops itself).
func (l serverLog) Fatalf(format string, v ...any) { l.logf(fmt.Sprintf(format, v...)) }

// Errorf logs an error.
func (l serverLog) Errorf(format string, v ...any) { l.logf(fmt.Sprintf(format, v...)) }

// Debugf drops a debug line.
func (serverLog) Debugf(string, ...any) {}

// Tracef drops a trace line.
func (serverLog) Tracef(string, ...any) {}
