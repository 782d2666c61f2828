package sipprobe

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Limits of resolv.conf(5) options, as glibc applies them (resolv.h's
// MAXNS, RES_MAXNDOTS, RES_MAXRETRANS and RES_MAXRETRY).
const (
	maxNameservers  = 3
	maxNdots        = 15
	defaultTimeout  = 5 * time.Second
	maxTimeout      = 30 * time.Second
	defaultAttempts = 2
	maxAttempts     = 5
)

// resolvConf is what qualifyd uses of resolv.conf(5).
type resolvConf struct {
	// servers are "addr:53", in file order, at most maxNameservers;
	// 127.0.0.1:53 when the file names none (glibc's default).
	servers []string
	// search are the domains tried for a name with fewer than ndots
	// dots, each with a trailing dot.
	search   []string
	ndots    int
	timeout  time.Duration // per server and attempt
	attempts int           // rounds over the servers
	rotate   bool          // start each query at the next server
}

// parseResolvConf reads resolv.conf(5) as glibc does: "nameserver",
// "domain" and "search" (the last of these two wins) and the options
// ndots, timeout, attempts and rotate, each clamped to glibc's range.
// Without "domain" or "search", the search list is the domain of
// hostname, if it has one. Unknown lines and options are ignored.
func parseResolvConf(b []byte, hostname string) resolvConf {
	c := resolvConf{ndots: 1, timeout: defaultTimeout, attempts: defaultAttempts}
	if _, dom, ok := strings.Cut(hostname, "."); ok && dom != "" {
		c.search = []string{fqdn(dom)}
	}
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) < 2 || f[0][0] == '#' || f[0][0] == ';' {
			continue
		}
		switch f[0] {
		case "nameserver":
			c.addServer(f[1])
		case "domain":
			c.search = []string{fqdn(f[1])}
		case "search":
			c.search = c.search[:0:0]
			for _, d := range f[1:] {
				c.search = append(c.search, fqdn(d))
			}
		case "options":
			for _, o := range f[1:] {
				c.option(o)
			}
		}
	}
	if len(c.servers) == 0 {
		c.servers = []string{"127.0.0.1:53"}
	}
	return c
}

func fqdn(s string) string { return strings.TrimSuffix(s, ".") + "." }

func (c *resolvConf) addServer(s string) {
	a, err := netip.ParseAddr(s)
	if err != nil || len(c.servers) == maxNameservers {
		return
	}
	c.servers = append(c.servers, net.JoinHostPort(a.Unmap().String(), "53"))
}

// option applies one "options" word; timeout is whole seconds, at least
// one (glibc never waits less), attempts at least one.
func (c *resolvConf) option(o string) {
	if o == "rotate" {
		c.rotate = true
		return
	}
	k, v, ok := strings.Cut(o, ":")
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n < 0 {
		return
	}
	switch k {
	case "ndots":
		c.ndots = min(n, maxNdots)
	case "timeout":
		c.timeout = min(time.Duration(max(n, 1))*time.Second, maxTimeout)
	case "attempts":
		c.attempts = min(max(n, 1), maxAttempts)
	}
}

// names returns the absolute names to try for host, in order, as glibc's
// res_search: a name ending in a dot as it is; one with at least ndots
// dots as it is, then with each search domain; one with fewer, with each
// search domain, then as it is.
func (c *resolvConf) names(host string) []string {
	if strings.HasSuffix(host, ".") {
		return []string{host}
	}
	abs := host + "."
	out := make([]string, 0, len(c.search)+1)
	many := strings.Count(host, ".") >= c.ndots
	if many {
		out = append(out, abs)
	}
	for _, d := range c.search {
		if d != "." {
			out = append(out, abs+d)
		}
	}
	if !many {
		out = append(out, abs)
	}
	return out
}

// first is the index of the server a query starts at: the n-th query's
// round-robin place with rotate, else the first.
func (c *resolvConf) first(n uint32) int {
	if !c.rotate {
		return 0
	}
	return int(n % uint32(len(c.servers)))
}

// wait is how long a try of server i waits, as glibc's send_dg computes
// it: timeout << i / (number of servers) for i > 0, in whole seconds, at
// least one. With one or two servers that is the timeout itself; with
// three, 5 s gives 5, 3 and 6 s. (A timeout under a second, which
// resolv.conf cannot give, is kept as it is.)
func (c *resolvConf) wait(i int) time.Duration {
	d := c.timeout
	if i > 0 {
		d = (d << i) / time.Duration(len(c.servers))
	}
	if d >= time.Second {
		d = d.Truncate(time.Second)
	}
	return max(d, min(c.timeout, time.Second))
}
