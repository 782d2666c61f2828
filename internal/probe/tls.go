package probe

import (
	"crypto/tls"
	"crypto/x509"
)

// TLS is a pjsip TLS transport as the client of a probe: what its
// ca_list_file, ca_list_path, verify_server, allow_wildcard_certs,
// cert_file, priv_key_file, password and method make of the connections
// Asterisk opens through it, defaults included (docs/configuration.md,
// "What a TLS probe trusts"). The configuration reader builds one per
// TLS transport, its files read; the prober dials with it.
type TLS struct {
	TLSSettings
	// ID identifies the settings and the contents of the files they
	// name (a digest): probes of one ID share connections, and a reload
	// that changes neither keeps them.
	ID string
	// Roots are the CAs of ca_list_file and ca_list_path; nil for
	// neither, which trusts no certificate, as pjproject loads no
	// default roots.
	Roots *x509.CertPool
	// Certificate is cert_file's chain with priv_key_file's key,
	// presented whenever the server asks for one; nil for none.
	Certificate *tls.Certificate
	// MinVersion and MaxVersion are the TLS versions method allows, as
	// crypto/tls constants: one version but for sslv23 (TLS 1.0 to
	// 1.3). sslv2 and sslv3 allow only those, which no handshake
	// negotiates.
	MinVersion, MaxVersion uint16
}

// TLSSettings are a TLS transport's options as written, defaults
// applied: what check-config prints and the reload rule compares.
type TLSSettings struct {
	// Transport is the transport section's name.
	Transport string
	// CAFile and CAPath are ca_list_file and ca_list_path; "" for unset.
	CAFile, CAPath string
	// VerifyServer is verify_server (default no): without it the server's
	// certificate is neither verified nor matched to its name.
	VerifyServer bool
	// AllowWildcardCerts is allow_wildcard_certs (default no): with
	// VerifyServer, a name may match a certificate's "*.domain".
	AllowWildcardCerts bool
	// CertFile and KeyFile are cert_file and priv_key_file; "" for unset.
	CertFile, KeyFile string
	// KeyUnreadable says that priv_key_file could not be read for want
	// of permission, so no client certificate is presented.
	KeyUnreadable bool
	// Method is method, lower case; "" when unset (Asterisk's default,
	// pjproject's tlsv1).
	Method string
}

// Settings returns t's settings; the zero TLSSettings for a nil t.
func (t *TLS) Settings() TLSSettings {
	if t == nil {
		return TLSSettings{}
	}
	return t.TLSSettings
}
