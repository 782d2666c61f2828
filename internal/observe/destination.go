package observe

import (
	"net/netip"
	"strconv"
	"strings"
)

// HostPort returns a SIP URI's host and port as a dispatcher destination
// is matched: the host lower case (IP literals in their canonical form,
// IPv6 in brackets), the port 5060 when the URI gives none (5061 for
// sips:). ok is false for a URI without a host.
func HostPort(uri string) (string, bool) {
	lower := strings.ToLower(strings.TrimSpace(uri))
	port := "5060"
	rest, ok := strings.CutPrefix(lower, "sip:")
	if !ok {
		if rest, ok = strings.CutPrefix(lower, "sips:"); !ok {
			return "", false
		}
		port = "5061"
	}
	if i := strings.IndexAny(rest, ";?>"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	host, p, ok := splitHost(rest)
	if !ok {
		return "", false
	}
	if p != "" {
		port = p
	}
	return joinHost(host) + ":" + port, true
}

// splitHost splits "host", "host:port", "[v6]" or "[v6]:port".
func splitHost(s string) (host, port string, ok bool) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false
		}
		host, s = s[1:end], s[end+1:]
		port, _ = strings.CutPrefix(s, ":")
		return host, port, host != ""
	}
	host, port, _ = strings.Cut(s, ":")
	return host, port, host != ""
}

// joinHost writes a host as HostPort keys it.
func joinHost(host string) string {
	host = strings.TrimSuffix(host, ".")
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		if a.Is6() {
			return "[" + a.String() + "]"
		}
		return a.String()
	}
	return host
}

// Destination returns a destination as an Observation holds it: a SIP
// URI's, or "host" or "host:port" written as HostPort writes a URI's
// (port 5060 when none). ok is false without a host or with a port
// that is not 1 to 65535.
func Destination(s string) (string, bool) {
	t := strings.TrimSpace(s)
	l := strings.ToLower(t)
	if !strings.HasPrefix(l, "sip:") && !strings.HasPrefix(l, "sips:") {
		if strings.ContainsAny(t, "@;?> ") {
			return "", false
		}
		t = "sip:" + t
	}
	d, ok := HostPort(t)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(d, ':')
	port, err := strconv.ParseUint(d[i+1:], 10, 16)
	if i <= 0 || err != nil || port == 0 {
		return "", false
	}
	return d, true
}
