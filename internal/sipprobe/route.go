package sipprobe

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/emiago/sipgo/sip"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/sipuri"
)

// transport is a SIP transport protocol.
type transport uint8

const (
	udp transport = iota
	tcp
	tlsTransport
)

// via returns the transport token of a Via header.
func (t transport) via() string { return [...]string{"UDP", "TCP", "TLS"}[t] }

func (t transport) String() string { return [...]string{"udp", "tcp", "tls"}[t] }

// defaultPort is the port of a URI without one (RFC 3263 section 4.2).
func (t transport) defaultPort() uint16 {
	if t == tlsTransport {
		return 5061
	}
	return 5060
}

// route is what a target's URI and options say about where and how to
// send: parsed once per (URI, options) and cached.
type route struct {
	ruri  string
	proxy string // Route header value, or ""
	// host is where the request goes: the contact, or the outbound proxy.
	host      string
	addr      netip.Addr // host as an IP literal, if it is one
	port      uint16     // 0: none in the URI
	transport transport
	// dest is the address when host is an IP literal.
	dest netip.AddrPort
	// fromUser and fromDomain come from the target's ProbeOptions.
	fromUser, fromDomain string
	// tls is the TLS profile of a route over TLS, one per profile ID
	// (routes.canonical); nil for the prober's own configuration.
	tls *probe.TLS
}

// maxRoutes bounds the route cache; it is emptied when full, which only
// costs a re-parse.
const maxRoutes = 1 << 16

// routes caches parsed routes by contact URI. The key is the URI alone,
// which hashes in a fraction of the time of the URI and the options
// together (at a million contacts most lookups miss, and hashing both
// was a sixth of the prober's CPU); a route parsed with other options is
// parsed again.
type routes struct {
	mu sync.RWMutex
	m  map[string]*parsedRoute
	// profiles holds the first TLS profile seen of each ID, which every
	// route of that ID takes: a reload reads the transports into new
	// profiles, and its routes keep the connections of the old ones.
	profiles map[string]*probe.TLS
}

// parsedRoute is a cached route and the options it was parsed with, kept
// out of route so that the fast path's route on the stack stays small.
type parsedRoute struct {
	route
	opts probe.Options
}

// get returns the route of a contact URI with options, parsing it on
// first use.
func (rs *routes) get(uri string, opts *probe.Options) (*route, error) {
	var o probe.Options
	if opts != nil {
		o = *opts
	}
	rs.mu.RLock()
	c := rs.m[uri]
	rs.mu.RUnlock()
	if c != nil && c.opts == o {
		return &c.route, nil
	}
	r, err := parseRoute(uri, &o)
	if err != nil {
		return nil, err
	}
	c = &parsedRoute{route: *r, opts: o}
	rs.mu.Lock()
	if r.transport == tlsTransport {
		c.tls = rs.canonical(o.TLS)
	}
	if len(rs.m) >= maxRoutes || rs.m == nil {
		rs.m = make(map[string]*parsedRoute)
	}
	rs.m[uri] = c
	rs.mu.Unlock()
	return &c.route, nil
}

// fastRoute fills rt for the common contact of a registered device: a
// sip: URI whose host is an IP literal, without parameters, headers or
// display name, probed without an outbound proxy over UDP. It needs
// neither sipgo's parser, nor the cache, nor an allocation (with more
// contacts than the cache holds, nearly every lookup would miss and
// parse). It reports false for anything else, which parseRoute handles.
func fastRoute(uri string, o *probe.Options, rt *route) bool {
	if o != nil && (o.OutboundProxy != "" || (o.Transport != "" && !strings.EqualFold(o.Transport, "udp"))) {
		return false
	}
	host, ok := strings.CutPrefix(uri, "sip:")
	if !ok || strings.ContainsAny(host, ";?<>\"%, \t") {
		return false
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	dest, ok := ipHostPort(host)
	if !ok {
		return false
	}
	*rt = route{ruri: uri, host: host, addr: dest.Addr(), port: dest.Port(), transport: udp, dest: dest}
	if o != nil {
		rt.fromUser, rt.fromDomain = o.FromUser, o.FromDomain
	}
	return true
}

// ipHostPort parses "a.b.c.d", "a.b.c.d:port", "[v6]" or "[v6]:port"
// (port 5060 when absent, never 0).
func ipHostPort(host string) (netip.AddrPort, bool) {
	if ap, err := netip.ParseAddrPort(host); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ap.Port() != 0
	}
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") || (!strings.HasPrefix(host, "[") && strings.Contains(host, ":")) {
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), udp.defaultPort()), true
}

// parseRoute builds the route of a contact URI: the destination is the
// outbound proxy when there is one, else the contact.
func parseRoute(uri string, o *probe.Options) (*route, error) {
	contact, err := parseSIPURI(uri)
	if err != nil {
		return nil, err
	}
	r := &route{ruri: uri, fromUser: o.FromUser, fromDomain: o.FromDomain}
	dest := contact
	if o.OutboundProxy != "" {
		if dest, err = parseSIPURI(o.OutboundProxy); err != nil {
			return nil, fmt.Errorf("outbound proxy: %w", err)
		}
		r.proxy = routeValue(o.OutboundProxy)
	}
	if r.transport, err = chooseTransport(&dest, o.Transport); err != nil {
		return nil, err
	}
	r.host, r.port = dest.Host, uint16(dest.Port)
	if a, err := netip.ParseAddr(strings.Trim(dest.Host, "[]")); err == nil {
		r.addr = a.Unmap()
		r.dest = netip.AddrPortFrom(r.addr, cmpOr(r.port, r.transport.defaultPort()))
	}
	return r, nil
}

// parseSIPURI parses a sip: or sips: URI as the configuration reader
// checks it (sipuri.Parse), so that a contact the reader accepts is one
// a route can be built for.
func parseSIPURI(s string) (sip.Uri, error) {
	return sipuri.Parse(s)
}

// chooseTransport picks the transport as Asterisk does: the URI's
// transport parameter (or the sips scheme), then the endpoint's transport.
func chooseTransport(u *sip.Uri, endpoint string) (transport, error) {
	name, _ := u.UriParams.Get("transport")
	if name == "" {
		name = endpoint
	}
	if u.Scheme == "sips" {
		name = "tls"
	}
	switch strings.ToLower(name) {
	case "", "udp":
		return udp, nil
	case "tcp":
		return tcp, nil
	case "tls":
		return tlsTransport, nil
	}
	return udp, fmt.Errorf("URI %q: unsupported transport %q", u.String(), name)
}

// routeValue is the Route header value for an outbound proxy: the URI in
// angle brackets with the loose-routing parameter (RFC 3261 section 16.12).
func routeValue(proxy string) string {
	uri := strings.Trim(proxy, "<>")
	if !strings.Contains(uri, ";lr") {
		uri += ";lr"
	}
	return "<" + uri + ">"
}

// hostPort formats a local address as a Via sent-by.
func hostPort(ap netip.AddrPort) string {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// cmpOr returns p, or def when p is 0.
func cmpOr(p, def uint16) uint16 {
	if p == 0 {
		return def
	}
	return p
}
