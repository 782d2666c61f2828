// Package sipuri checks the SIP URIs qualifyd sends requests to: a
// contact or an outbound proxy is parsed here once, by the prober when
// it builds a route and by the configuration reader when it reads a
// contact, so that a URI the reader accepts is one the prober can use.
package sipuri

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// MaxHost is pjproject's PJ_MAX_HOSTNAME, the longest host Asterisk
// accepts.
const MaxHost = 255

// Error is a URI a request cannot be sent to, and why.
type Error struct {
	// URI is the URI as given, without angle brackets.
	URI string
	// Err says what is wrong with it.
	Err error
}

// Error formats the error as URI "u": why.
func (e *Error) Error() string { return fmt.Sprintf("URI %q: %v", e.URI, e.Err) }

// Unwrap returns why.
func (e *Error) Unwrap() error { return e.Err }

// transports are the transport parameter values a probe can be sent
// over, lower case.
var transports = []string{"udp", "tcp", "tls"}

// Parse parses a sip: or sips: URI, optionally in angle brackets, with
// sipgo's parser, and checks what a request to it needs: a host that is
// an IP literal or a host name (RFC 3261 section 25.1), a port in
// 1..65535 when one is written, and a transport parameter, if any, of
// udp, tcp or tls. Its errors are *Error.
func Parse(s string) (sip.Uri, error) {
	var u sip.Uri
	s = strings.Trim(s, "<>")
	if err := parse(s, &u); err != nil {
		return u, &Error{URI: s, Err: err}
	}
	return u, nil
}

func parse(s string, u *sip.Uri) error {
	if p, ok := portText(s); ok {
		if err := checkPort(p); err != nil {
			return err
		}
	}
	if err := sip.ParseUri(s, u); err != nil {
		return err
	}
	if u.Scheme != "sip" && u.Scheme != "sips" {
		return fmt.Errorf("scheme %q is not sip or sips", u.Scheme)
	}
	if err := checkHost(u.Host); err != nil {
		return err
	}
	if t, _ := u.UriParams.Get("transport"); t != "" && !isTransport(t) {
		return fmt.Errorf("transport %q is not one a probe is sent over (udp, tcp or tls)", t)
	}
	return nil
}

// portText returns the port of a sip: URI as written, found as sipgo's
// parser finds it (the host part follows the first '@', or the scheme),
// and whether the URI writes one (a ':' after the host, even with no
// digits).
func portText(s string) (string, bool) {
	_, rest, _ := strings.Cut(s, ":")
	rest = strings.TrimPrefix(rest, "//")
	if i := strings.IndexAny(rest, "[@"); i >= 0 {
		if rest[i] == '@' {
			i++
		}
		rest = rest[i:]
	}
	if strings.HasPrefix(rest, "[") {
		i := strings.IndexByte(rest, ']')
		if i < 0 || !strings.HasPrefix(rest[i+1:], ":") {
			return "", false
		}
		rest = rest[i+2:]
	} else {
		i := strings.IndexAny(rest, ":;?")
		if i < 0 || rest[i] != ':' {
			return "", false
		}
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, ";?"); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// checkPort accepts decimal digits (RFC 3261's 1*DIGIT, leading zeros
// too, as sipgo and net/netip read them) of a port in 1..65535.
func checkPort(p string) error {
	if p == "" {
		return errors.New("empty port")
	}
	n, err := strconv.ParseUint(p, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number in 1-65535", p)
	}
	return nil
}

// checkHost accepts an IPv4 address, an IPv6 reference ("[::1]") and a
// host name of at most MaxHost characters: dot-separated labels of
// letters, digits, '-' and '_' (pjproject's host characters), none empty
// or starting or ending with '-', an optional final dot, and a last
// label that starts with a letter (RFC 3261's toplabel), so that a cut
// or mistyped IPv4 address such as "127." or "10.0.0" is no host name.
func checkHost(h string) error {
	switch {
	case h == "":
		return errors.New("no host")
	case len(h) > MaxHost:
		return fmt.Errorf("host is longer than %d characters", MaxHost)
	case strings.HasPrefix(h, "["):
		if a, err := netip.ParseAddr(strings.TrimSuffix(h[1:], "]")); err != nil || !a.Is6() || !strings.HasSuffix(h, "]") {
			return fmt.Errorf("host %q is not an IPv6 address", h)
		}
		return nil
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
		return nil
	}
	if !isHostName(h) {
		return fmt.Errorf("host %q is neither an IP address nor a host name", h)
	}
	return nil
}

func isHostName(h string) bool {
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	for _, l := range labels {
		if !isLabel(l) {
			return false
		}
	}
	top := labels[len(labels)-1][0]
	return top|0x20 >= 'a' && top|0x20 <= 'z'
}

func isLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func isTransport(t string) bool {
	for _, name := range transports {
		if strings.EqualFold(t, name) {
			return true
		}
	}
	return false
}

// Check is Parse without its result. The contact of a registered device,
// "sip:user@a.b.c.d:port" without parameters, is checked without sipgo's
// parser: a load reads a million of them.
func Check(s string) error {
	if rest, ok := strings.CutPrefix(s, "sip:"); ok && !strings.ContainsAny(rest, ";?<>[") {
		if i := strings.IndexByte(rest, '@'); i >= 0 {
			rest = rest[i+1:]
		}
		if ap, err := netip.ParseAddrPort(rest); err == nil && ap.Addr().Is4() && ap.Port() != 0 {
			return nil
		}
		if a, err := netip.ParseAddr(rest); err == nil && a.Is4() {
			return nil
		}
	}
	_, err := Parse(s)
	return err
}
