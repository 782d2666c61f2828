package sipprobe

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// canonical returns the profile the routes of t's ID take: the first
// seen. Called with rs.mu held.
func (rs *routes) canonical(t *probe.TLS) *probe.TLS {
	if t == nil {
		return nil
	}
	if c, ok := rs.profiles[t.ID]; ok {
		return c
	}
	if rs.profiles == nil {
		rs.profiles = make(map[string]*probe.TLS)
	}
	rs.profiles[t.ID] = t
	return t
}

// clientConfig is the configuration of a TLS connection to serverName:
// base (the prober's own, verified against its roots) without a profile;
// with one, what Asterisk's transport does (docs/configuration.md, "What
// a TLS probe trusts"): the method's versions, its certificate presented
// whenever the server asks, and the server's certificate checked only
// with verify_server, as pjproject checks it (verifyServer).
func clientConfig(base *tls.Config, t *probe.TLS, serverName string) *tls.Config {
	if t == nil {
		cfg := base.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = serverName
		}
		return cfg
	}
	// InsecureSkipVerify leaves the check to VerifyConnection, which
	// matches names as pjproject does rather than as crypto/tls.
	cfg := &tls.Config{ServerName: serverName, MinVersion: t.MinVersion, MaxVersion: t.MaxVersion, InsecureSkipVerify: true}
	if t.Certificate != nil {
		// OpenSSL sends its certificate whatever CAs the request names;
		// crypto/tls would choose among Certificates by them.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return t.Certificate, nil }
	}
	if t.VerifyServer {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyServer(cs.PeerCertificates, t, serverName) }
	}
	return cfg
}

// verifyServer checks the server's chain against t's roots (none without
// a CA list: pjproject loads no default ones) and its name as
// pjproject's tls_on_connect_complete matches it, with Asterisk's
// wildcard rule when allow_wildcard_certs is set
// (pjsip_transport_events.c, transport_tls_verify).
func verifyServer(certs []*x509.Certificate, t *probe.TLS, name string) error {
	if len(certs) == 0 {
		return errors.New("x509: the server sent no certificate")
	}
	roots, inter := t.Roots, x509.NewCertPool()
	if roots == nil {
		roots = x509.NewCertPool()
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := certs[0].Verify(opts); err != nil {
		return err
	}
	if !certNames(certs[0], func(n string) bool { return nameMatches(name, n, t.AllowWildcardCerts) }) {
		return fmt.Errorf("x509: certificate is not valid for %s (names %s; no wildcard without allow_wildcard_certs)", name, strings.Join(names(certs[0]), ", "))
	}
	return nil
}

// certNames reports whether match holds for one of c's names, in
// pjproject's order: subjectAltName DNS names, IP addresses and the hosts
// of sip: and sips: URIs, then the subject's common name.
func certNames(c *x509.Certificate, match func(string) bool) bool {
	for _, n := range names(c) {
		if match(n) {
			return true
		}
	}
	return false
}

// names are c's names as certNames tries them.
func names(c *x509.Certificate) []string {
	var ns []string
	ns = append(ns, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		ns = append(ns, ip.String())
	}
	for _, u := range c.URIs {
		if u.Scheme == "sip" || u.Scheme == "sips" {
			ns = append(ns, strings.TrimPrefix(u.String(), u.Scheme+":"))
		}
	}
	return append(ns, c.Subject.CommonName)
}

// nameMatches reports whether host is certName, ignoring case; with
// wildcard, also when certName is "*." and host's part after its first
// label (Asterisk's verify_cert_name).
func nameMatches(host, certName string, wildcard bool) bool {
	if strings.EqualFold(host, certName) {
		return true
	}
	rest, ok := strings.CutPrefix(certName, "*.")
	if !wildcard || !ok {
		return false
	}
	_, parent, ok := strings.Cut(host, ".")
	return ok && parent != "" && !strings.HasPrefix(host, ".") && strings.EqualFold(parent, rest)
}
