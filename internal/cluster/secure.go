package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Secure are the options of the [cluster] section that keep out every
// server and client the file did not invite: mutual TLS and a shared
// secret on the embedded server's routes, the cluster's name, and how
// qualifyd authenticates to an external NATS.
type Secure struct {
	// Name is the NATS cluster name (name=; default DefaultName of the
	// nodes), so that a route to another cluster's node is refused.
	Name string
	// TLSCert and TLSKey are the node's certificate and private key, PEM
	// files; "{node}" in them is replaced by the node's name (tls_cert=,
	// tls_key=). TLSCA is the CA every node's certificate is checked
	// against (tls_ca=). The three go together.
	TLSCert, TLSKey, TLSCA string
	// SecretFile holds the routes' shared secret, one line, readable by
	// its owner only (secret_file=).
	SecretFile string
	// InsecureRoutes allows routes off loopback without TLS
	// (insecure_routes=yes).
	InsecureRoutes bool

	// NATSCA is the CA of an external NATS's certificate (nats_ca=);
	// NATSCert and NATSKey are qualifyd's client certificate to it
	// (nats_cert=, nats_key=; "{node}" replaced as in TLSCert).
	NATSCA, NATSCert, NATSKey string
	// NATSCreds is a NATS .creds file (nats_creds=), NATSNkey an nkey
	// seed file (nats_nkey=), NATSUser and NATSPasswordFile a user and
	// the file of its password (nats_user=, nats_password_file=): at most
	// one of the three.
	NATSCreds, NATSNkey, NATSUser, NATSPasswordFile string
	// InsecureNATS allows a password or token to an external NATS off
	// loopback in clear: a nats:// or ws:// URL without nats_ca
	// (insecure_nats=yes).
	InsecureNATS bool
}

// secureOptions are Secure's options, in the order docs/configuration.md lists
// them.
var secureOptions = []string{"name", "tls_cert", "tls_key", "tls_ca", "secret_file", "insecure_routes",
	"nats_ca", "nats_cert", "nats_key", "nats_creds", "nats_nkey", "nats_user", "nats_password_file", "insecure_nats"}

// nodePlaceholder is replaced by the node's name in tls_cert, tls_key,
// nats_cert and nats_key.
const nodePlaceholder = "{node}"

// setSecure applies one of Secure's options.
func (c *Config) setSecure(option, value string) error {
	if p := c.Secure.path(option); p != nil {
		*p = value
		return nonEmpty(value)
	}
	switch option {
	case "name":
		c.Name = value
		if err := checkName(value); err != nil {
			return fmt.Errorf("%w: %q: %w", ErrValue, value, err)
		}
		return nil
	case "insecure_routes":
		return parseBool(value, &c.InsecureRoutes)
	case "insecure_nats":
		return parseBool(value, &c.InsecureNATS)
	case "nats_user":
		c.NATSUser = value
		return nonEmpty(value)
	}
	return fmt.Errorf("%w: a cluster section has %s", ErrUnknownOption, strings.Join(Options, ", "))
}

// path returns the field of a file option, nil for another option.
func (s *Secure) path(option string) *string {
	fields := map[string]*string{"tls_cert": &s.TLSCert, "tls_key": &s.TLSKey, "tls_ca": &s.TLSCA,
		"secret_file": &s.SecretFile, "nats_ca": &s.NATSCA, "nats_cert": &s.NATSCert, "nats_key": &s.NATSKey,
		"nats_creds": &s.NATSCreds, "nats_nkey": &s.NATSNkey, "nats_password_file": &s.NATSPasswordFile}
	return fields[option]
}

// parseBool reads a boolean option into b with the words, and the error
// text, of every other section of the file (pjsip.ParseBool).
func parseBool(v string, b *bool) error {
	t, err := pjsip.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrValue, err)
	}
	*b = t
	return nil
}

// DefaultName is the NATS cluster name of nodes without name=:
// "qualifyd-" and a hash of the nodes' names, whatever their order, so
// that two clusters of different nodes never merge by a wrong route.
func DefaultName(nodes []Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	slices.Sort(names)
	h := sha256.Sum256([]byte(strings.Join(names, ",")))
	return "qualifyd-" + hex.EncodeToString(h[:4])
}

// finishSecure replaces {node}, defaults the name, and checks that the
// options suit the NATS chosen.
func (c *Config) finishSecure() error {
	for _, p := range []*string{&c.TLSCert, &c.TLSKey, &c.NATSCert, &c.NATSKey} {
		*p = strings.ReplaceAll(*p, nodePlaceholder, c.Self)
	}
	if c.NATSURL != "" {
		return c.checkExternal()
	}
	if c.Name == "" {
		c.Name = DefaultName(c.Nodes)
	}
	return c.checkRoutes()
}

// checkExternal refuses the embedded server's options with nats_url=,
// and credentials that contradict each other.
func (c *Config) checkExternal() error {
	if c.Name != "" || c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" || c.SecretFile != "" || c.InsecureRoutes {
		return fmt.Errorf("%w: name, tls_cert, tls_key, tls_ca, secret_file and insecure_routes are the embedded server's; with nats_url= use nats_ca, nats_cert, nats_key and the nats_ credentials", ErrValue)
	}
	if (c.NATSCert == "") != (c.NATSKey == "") {
		return fmt.Errorf("%w: nats_cert and nats_key go together", ErrValue)
	}
	if (c.NATSUser == "") != (c.NATSPasswordFile == "") {
		return fmt.Errorf("%w: nats_user and nats_password_file go together", ErrValue)
	}
	if count(c.NATSCreds != "", c.NATSNkey != "", c.NATSUser != "") > 1 {
		return fmt.Errorf("%w: nats_creds, nats_nkey and nats_user are three ways to authenticate: choose one", ErrValue)
	}
	return c.checkClearSecret()
}

// checkClearSecret refuses a password or token that would cross the
// network in clear, as checkRoutes refuses clear routes: one in a URL of
// nats_url (its user part), or nats_password_file's, sent to a server
// off loopback over nats:// or ws:// without nats_ca (with which the
// client requires TLS), unless insecure_nats=yes. A .creds file or an
// nkey sends a signature, no secret.
func (c *Config) checkClearSecret() error {
	if c.NATSCA != "" || c.InsecureNATS {
		return nil
	}
	for s := range strings.SplitSeq(c.NATSURL, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil { // checked by Set
			return fmt.Errorf("%w: %q: want nats://host:port", ErrValue, redactURL(s))
		}
		plain := u.Scheme == "nats" || u.Scheme == "ws"
		if plain && !loopbackHost(u.Hostname()) && (u.User != nil || c.NATSPasswordFile != "") {
			return fmt.Errorf("%w: %q: a password or token to a NATS off loopback would cross the network in clear: set nats_ca (the client then speaks TLS), use tls://, or set insecure_nats=yes",
				ErrValue, redactURL(s))
		}
	}
	return nil
}

// checkRoutes refuses nats_ options without nats_url=, TLS options set
// in part, and routes off loopback in clear unless insecure_routes=yes.
func (c *Config) checkRoutes() error {
	if c.NATSCA != "" || c.NATSCert != "" || c.NATSKey != "" || c.NATSCreds != "" || c.NATSNkey != "" || c.NATSUser != "" || c.NATSPasswordFile != "" {
		return fmt.Errorf("%w: the nats_ options are for an external NATS (nats_url=); the embedded server's routes use tls_cert, tls_key, tls_ca and secret_file", ErrValue)
	}
	if c.InsecureNATS {
		return fmt.Errorf("%w: insecure_nats is for an external NATS (nats_url=)", ErrValue)
	}
	if n := count(c.TLSCert != "", c.TLSKey != "", c.TLSCA != ""); n > 0 && n < 3 {
		return fmt.Errorf("%w: tls_cert, tls_key and tls_ca go together", ErrValue)
	}
	if c.RouteTLS() || c.InsecureRoutes {
		return nil
	}
	for _, n := range c.Nodes {
		if !loopback(n.Route) {
			return fmt.Errorf("%w: node %q routes on %s: routes off loopback need tls_cert, tls_key and tls_ca (or insecure_routes=yes)", ErrValue, n.Name, n.Route)
		}
	}
	return nil
}

// RouteTLS reports whether the embedded server's routes use mutual TLS.
func (c *Config) RouteTLS() bool { return c.NATSURL == "" && c.TLSCert != "" }

// loopback reports whether route's host is localhost or a loopback
// address.
func loopback(route string) bool {
	host, _, err := net.SplitHostPort(route)
	return err == nil && loopbackHost(host)
}

// loopbackHost reports whether host (without brackets) is localhost or
// a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// count counts the true values.
func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
