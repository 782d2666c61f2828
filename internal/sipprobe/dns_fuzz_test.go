package sipprobe

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzDNSAnswer feeds any DNS message, as every server's answer to every
// query, through the resolver's handling of answers (rcode, truncation,
// records of the type asked, SRV order, TTLs) to the targets probed: at
// most maxTargets valid addresses, on the URI's port when it has one.
func FuzzDNSAnswer(f *testing.F) {
	files := testFiles(f, "", "", "")
	f.Fuzz(func(t *testing.T, wire []byte) {
		msg := new(dns.Msg)
		if msg.Unpack(wire) != nil {
			return
		}
		for _, qtype := range []uint16{dns.TypeSRV, dns.TypeA, dns.TypeAAAA} {
			_, ttl := answers(msg, qtype)
			if ttl < minTTL || ttl > maxTTL {
				t.Fatalf("TTL %v for %s", ttl, dns.TypeToString[qtype])
			}
		}
		r := newResolver("192.0.2.53:53", files)
		r.exchange = func(_ context.Context, q *dns.Msg, _ string, tcp bool) (*dns.Msg, error) {
			m := msg.Copy()
			m.Id, m.Question = q.Id, q.Question
			m.Truncated = m.Truncated && !tcp
			return m, nil
		}
		for _, port := range []uint16{0, 7} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			got, err := r.resolve(ctx, "pbx.test", port, udp)
			cancel()
			checkTargets(t, got, err, port)
		}
	})
}

func checkTargets(t *testing.T, got []netip.AddrPort, err error, port uint16) {
	t.Helper()
	if (err == nil) == (len(got) == 0) || len(got) > maxTargets {
		t.Fatalf("port %d: %d targets, error %v", port, len(got), err)
	}
	for _, a := range got {
		if !a.Addr().IsValid() || port != 0 && a.Port() != port {
			t.Fatalf("port %d: target %v", port, a)
		}
	}
}

// FuzzParseResolvConf: any file gives a usable configuration within
// glibc's bounds, and every name has absolute names to try.
func FuzzParseResolvConf(f *testing.F) {
	f.Add([]byte("nameserver 192.0.2.53\nsearch a.test b.test\noptions ndots:2 timeout:1 attempts:3 rotate\n"), "pbx")
	f.Fuzz(func(t *testing.T, b []byte, host string) {
		c := parseResolvConf(b, "vm.example.test")
		if len(c.servers) < 1 || len(c.servers) > maxNameservers || c.ndots < 0 || c.ndots > maxNdots ||
			c.timeout < time.Second || c.timeout > maxTimeout || c.attempts < 1 || c.attempts > maxAttempts {
			t.Fatalf("%+v", c)
		}
		names := c.names(host)
		if len(names) == 0 {
			t.Fatal("no names")
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".") {
				t.Fatalf("%q: name %q is not absolute", host, n)
			}
		}
	})
}

// FuzzParseHosts: every name of any hosts file looks up to valid
// addresses, IPv4 before IPv6, each once.
func FuzzParseHosts(f *testing.F) {
	f.Add([]byte("127.0.0.1 localhost\n::1 localhost ip6-localhost # c\n192.0.2.1 pbx\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h := parseHosts(b)
		for name := range h {
			as := h.lookup(name)
			seen := map[netip.Addr]bool{}
			for i, a := range as {
				if !a.IsValid() || seen[a] || i > 0 && a.Is4() && !as[i-1].Is4() {
					t.Fatalf("%q: %v", name, as)
				}
				seen[a] = true
			}
		}
	})
}
