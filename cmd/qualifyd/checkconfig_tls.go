package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
)

// writeTLS prints, for each TLS transport, what a probe through it
// trusts and presents (docs/configuration.md, "What a TLS probe
// trusts").
func writeTLS(w *bufio.Writer, profiles []*probe.TLS) {
	for _, t := range profiles {
		fmt.Fprintf(w, "TLS transport %s: %s; client certificate %s; %s\n", t.Transport, trusts(t), clientCert(t), versions(t))
	}
}

// trusts says what a probe checks of the server's certificate.
func trusts(t *probe.TLS) string {
	if !t.VerifyServer {
		return "server certificates are not verified (verify_server=no, Asterisk's default)"
	}
	var cas []string
	if t.CAFile != "" {
		cas = append(cas, "ca_list_file "+t.CAFile)
	}
	if t.CAPath != "" {
		cas = append(cas, "ca_list_path "+t.CAPath)
	}
	if len(cas) == 0 {
		cas = append(cas, "no CA (no ca_list_file or ca_list_path)")
	}
	names := "name by subjectAltName or common name, no wildcard"
	if t.AllowWildcardCerts {
		names = "name by subjectAltName or common name, wildcards allowed"
	}
	return "server certificates verified against " + strings.Join(cas, " and ") + ", " + names
}

// clientCert names the certificate presented when a server asks.
func clientCert(t *probe.TLS) string {
	switch {
	case t.Certificate != nil:
		return t.CertFile
	case t.KeyUnreadable:
		return "none (priv_key_file unreadable)"
	case t.CertFile != "":
		return "none (cert_file without priv_key_file)"
	}
	return "none"
}

// versions names the TLS versions method allows.
func versions(t *probe.TLS) string {
	method := "method=" + t.Method
	if t.Method == "" {
		method = "method unset, pjproject's default"
	}
	if t.MinVersion == t.MaxVersion {
		return versionName(t.MinVersion) + " only (" + method + ")"
	}
	return versionName(t.MinVersion) + " to " + versionName(t.MaxVersion) + " (" + method + ")"
}

// versionName is tls.VersionName, SSL 2.0 included.
func versionName(v uint16) string {
	if v == 0x0200 {
		return "SSLv2"
	}
	return tls.VersionName(v)
}

// warnTLS warns of the TLS transports through which no probe can
// succeed: verify_server without a CA list, and SSL methods.
func warnTLS(stderr io.Writer, cfg *pjsip.Config) {
	for _, t := range cfg.TLS {
		if t.VerifyServer && t.Roots == nil {
			fmt.Fprintf(stderr, "qualifyd check-config: warning: TLS transport %s: verify_server=yes without ca_list_file or ca_list_path trusts no server certificate: every probe through it fails, as Asterisk's do\n", t.Transport)
		}
		if t.MaxVersion < tls.VersionTLS10 {
			fmt.Fprintf(stderr, "qualifyd check-config: warning: TLS transport %s: method=%s allows only %s, which neither qualifyd nor Asterisk's OpenSSL 3 speaks: every probe through it fails\n", t.Transport, t.Method, versionName(t.MaxVersion))
		}
	}
}
