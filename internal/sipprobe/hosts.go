package sipprobe

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
)

// hostsFile maps a lower-case name (no trailing dot) of a hosts(5) file to
// its addresses in file order, from every line that names it (glibc's
// "multi on", its default since 2.26).
type hostsFile map[string][]netip.Addr

// parseHosts reads hosts(5): an address, then names and aliases, "#"
// starting a comment. Lines whose address does not parse are skipped, as
// glibc does.
func parseHosts(b []byte) hostsFile {
	h := make(hostsFile)
	for line := range bytes.Lines(b) {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		a = a.Unmap()
		for _, name := range f[1:] {
			key := hostKey(name)
			if !slices.Contains(h[key], a) {
				h[key] = append(h[key], a)
			}
		}
	}
	return h
}

// hostKey is the key of name: lower case, without a trailing dot.
func hostKey(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// lookup returns the addresses of name, IPv4 first then IPv6 (the order
// DNS answers are probed in), or nil.
func (h hostsFile) lookup(name string) []netip.Addr {
	as := h[hostKey(name)]
	var out []netip.Addr
	for _, v4 := range []bool{true, false} {
		for _, a := range as {
			if a.Is4() == v4 {
				out = append(out, a)
			}
		}
	}
	return out
}

// isLocalhost reports whether name is "localhost" or under it, which
// resolve to the loopback addresses and never go to DNS (RFC 6761
// section 6.3).
func isLocalhost(name string) bool {
	k := hostKey(name)
	return k == "localhost" || strings.HasSuffix(k, ".localhost")
}

// loopback are the addresses of a localhost name the hosts file lacks.
var loopback = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}

// source is a hosts database of nsswitch.conf(5) that qualifyd knows.
type source uint8

const (
	filesSource source = iota
	dnsSource
)

func (s source) String() string { return [...]string{"files", "dns"}[s] }

// defaultOrder is the order without a usable "hosts:" line: glibc's
// default and the usual "hosts: files dns".
var defaultOrder = []source{filesSource, dnsSource}

// parseNSSwitch returns the order of the "files" and "dns" sources of the
// "hosts:" line of nsswitch.conf(5). Other sources (myhostname, mdns,
// resolve) and the bracketed actions are ignored; a file without the
// line, or a line without either source, gives defaultOrder.
func parseNSSwitch(b []byte) []source {
	for line := range bytes.Lines(b) {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		db, rest, ok := strings.Cut(string(line), ":")
		if !ok || strings.TrimSpace(db) != "hosts" {
			continue
		}
		var order []source
		for _, f := range strings.Fields(rest) {
			switch strings.ToLower(f) {
			case "files":
				order = append(order, filesSource)
			case "dns":
				order = append(order, dnsSource)
			}
		}
		if len(order) > 0 {
			return order
		}
		return defaultOrder
	}
	return defaultOrder
}
