package sipprobe

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// testResolver reads the given files, with servers in place of
// resolv.conf's nameservers (which can name no port) and a per-try
// timeout short enough for real sockets.
func testResolver(t *testing.T, servers []string, resolv, hosts, nsswitch string) *resolver {
	t.Helper()
	r := newResolver("", testFiles(t, resolv, hosts, nsswitch))
	r.conf = newSysFile(r.conf.path, func(b []byte) resolvConf {
		c := parseResolvConf(b, "")
		c.servers, c.timeout = servers, 100*time.Millisecond
		return c
	})
	return r
}

// deadServer is a bound UDP socket that never answers.
func deadServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

// closedPort is a loopback UDP port nothing listens on: a query gets
// ICMP port unreachable.
func closedPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

func resolveString(r *resolver, host string, port uint16) string {
	got, err := r.resolve(context.Background(), host, port, udp)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(got)
}

// TestResolveServers: every nameserver in order on real sockets; the next
// on a timeout, a closed port or SERVFAIL; NXDOMAIN final; TCP after a
// truncated answer; the search list (docs/qualify-semantics.md §3.6).
func TestResolveServers(t *testing.T) {
	const rr = "pbx.test. 60 IN A 127.0.0.7"
	live := newDNSServer(t, rr)
	failing := newDNSServer(t, rr)
	failing.rcode.Store(dns.RcodeServerFailure)
	other := newDNSServer(t, "other.test. 60 IN A 127.0.0.8") // NXDOMAIN for pbx.test
	truncating := newDNSServer(t, rr)
	truncating.truncate.Store(true)
	dead1, dead2 := deadServer(t), deadServer(t)
	closed := closedPort(t)
	for _, tc := range []struct {
		name    string
		servers []string
		resolv  string
		host    string
		want    string
	}{
		{"dead first", []string{dead1, live.addr}, "", "pbx.test", "[127.0.0.7:5060]"},
		{"closed port first", []string{closed, live.addr}, "", "pbx.test", "[127.0.0.7:5060]"},
		{"servfail first", []string{failing.addr, live.addr}, "", "pbx.test", "[127.0.0.7:5060]"},
		{"nxdomain final", []string{other.addr, live.addr}, "", "pbx.test", "error: pbx.test: no SRV, A or AAAA records"},
		{"truncated", []string{truncating.addr}, "", "pbx.test", "[127.0.0.7:5060]"},
		{"search", []string{live.addr}, "search example.test test\n", "pbx", "[127.0.0.7:5060]"},
		{"ndots", []string{live.addr}, "search nowhere.test\noptions ndots:2\n", "pbx.test", "[127.0.0.7:5060]"},
		{"all dead", []string{dead1, dead2}, "options attempts:1\n", "pbx.test",
			fmt.Sprintf("error: pbx.test: no answer from %s, %s (timeout)", dead1, dead2)},
		{"dead and closed", []string{dead1, closed}, "options attempts:1\n", "pbx.test",
			fmt.Sprintf("error: pbx.test: no answer from %s (timeout), %s (connection refused)", dead1, closed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testResolver(t, tc.servers, tc.resolv, "", "")
			if got := resolveString(r, tc.host, 5060); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	if live.queries.Load() == 0 || truncating.tcp.Load() == 0 {
		t.Errorf("live server asked %d times, truncating one %d times over TCP", live.queries.Load(), truncating.tcp.Load())
	}
}

// TestResolveNXDOMAINNotPassedOn: the second server is not asked after an
// NXDOMAIN from the first.
func TestResolveNXDOMAINNotPassedOn(t *testing.T) {
	first := newDNSServer(t, "other.test. 60 IN A 127.0.0.8")
	second := newDNSServer(t, "pbx.test. 60 IN A 127.0.0.7")
	r := testResolver(t, []string{first.addr, second.addr}, "", "", "")
	if got := resolveString(r, "pbx.test", 5060); got != "error: pbx.test: no SRV, A or AAAA records" {
		t.Errorf("got %s", got)
	}
	if n := second.queries.Load(); n != 0 {
		t.Errorf("second server asked %d times", n)
	}
}

// TestResolveFiles: the hosts file answers before DNS (and without it,
// localhost still resolves); with "hosts: dns files" DNS answers first.
func TestResolveFiles(t *testing.T) {
	d := newDNSServer(t, "both.test. 60 IN A 127.0.0.9", "_sip._udp.srv.test. 60 IN SRV 0 0 5070 lan.test.")
	const hosts = "192.0.2.7 lan.test both.test\n::1 lan.test\n"
	for _, tc := range []struct {
		name, hosts, nsswitch, host string
		port                        uint16
		want                        string
	}{
		{"hosts", hosts, "", "lan.test", 0, "[192.0.2.7:5060 [::1]:5060]"},
		{"hosts port", hosts, "", "LAN.test.", 7, "[192.0.2.7:7 [::1]:7]"},
		{"hosts before dns", hosts, "", "both.test", 7, "[192.0.2.7:7]"},
		{"dns before hosts", hosts, "hosts: dns files\n", "both.test", 7, "[127.0.0.9:7]"},
		{"hosts after dns", hosts, "hosts: dns files\n", "lan.test", 7, "[192.0.2.7:7 [::1]:7]"},
		{"no files", hosts, "hosts: dns\n", "lan.test", 7, "error: lan.test: no SRV, A or AAAA records"},
		{"srv target in hosts", hosts, "", "srv.test", 0, "[192.0.2.7:5070 [::1]:5070]"},
		{"localhost", "", "", "localhost", 0, "[127.0.0.1:5060 [::1]:5060]"},
		{"under localhost", "", "", "pbx.localhost.", 5099, "[127.0.0.1:5099 [::1]:5099]"},
		{"localhost from hosts", "127.0.0.2 localhost\n", "", "localhost", 5099, "[127.0.0.2:5099]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testResolver(t, []string{d.addr}, "", tc.hosts, tc.nsswitch)
			if got := resolveString(r, tc.host, tc.port); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestResolveFilesNoDNS: names the files answer send no query, even to a
// dead server.
func TestResolveFilesNoDNS(t *testing.T) {
	d := newDNSServer(t)
	r := testResolver(t, []string{d.addr}, "", "192.0.2.7 lan.test\n", "")
	for _, host := range []string{"lan.test", "localhost"} {
		if got := resolveString(r, host, 0); got[0] != '[' {
			t.Errorf("%s: %s", host, got)
		}
	}
	if n := d.queries.Load(); n != 0 {
		t.Errorf("%d queries", n)
	}
}

// TestResolveHostsReread: a changed hosts file counts from the first
// resolution a second after the last look, and its answers are never
// cached beyond that.
func TestResolveHostsReread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := testResolver(t, []string{closedPort(t)}, "", "192.0.2.1 lan.test\n", "")
		if got := resolveString(r, "lan.test", 7); got != "[192.0.2.1:7]" {
			t.Fatalf("got %s", got)
		}
		if err := os.WriteFile(r.hosts.path, []byte("192.0.2.22 lan.test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := resolveString(r, "lan.test", 7); got != "[192.0.2.1:7]" {
			t.Errorf("within the second: got %s", got)
		}
		time.Sleep(time.Second)
		if got := resolveString(r, "lan.test", 7); got != "[192.0.2.22:7]" {
			t.Errorf("after a second: got %s", got)
		}
	})
}

// TestProbeHostsFile: a probe of a name in the hosts file reaches the peer
// without any DNS server.
func TestProbeHostsFile(t *testing.T) {
	live := newUDPResponder(t, func(x *exchange) { x.reply(200) })
	files := testFiles(t, "", "127.0.0.1 pbx.lan\n", "")
	p := newProber(t, Config{Resolver: closedPort(t), ResolvConf: files.resolvConf, HostsFile: files.hosts, NSSwitchConf: files.nsswitch})
	res := p.Probe(t.Context(), target("sip:trunk@pbx.lan:"+portOf(live.addr), 3*time.Second))
	if res.Code != 200 || res.Reason != qualify.ReasonNone || res.Addr() != "udp "+live.addr.String() {
		t.Fatalf("got %+v", res)
	}
}

// TestResolveResolvConfReread: a changed resolv.conf (here its search
// list) counts from the first resolution a second after the last look.
func TestResolveResolvConfReread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		onlyB := func(ctx context.Context, q *dns.Msg, tcp bool) (*dns.Msg, error) {
			if q.Question[0].Name == "pbx.b.test." && q.Question[0].Qtype == dns.TypeA {
				return rcode(dns.RcodeSuccess)(ctx, q, tcp)
			}
			return rcode(dns.RcodeNameError)(ctx, q, tcp)
		}
		f := &fakeNet{start: time.Now(), servers: map[string]behaviour{"a": onlyB}}
		r := testResolver(t, []string{"a"}, "search a.test\n", "", "")
		r.exchange = f.exchange
		if got := resolveString(r, "pbx", 7); got != "error: pbx: no SRV, A or AAAA records" {
			t.Fatalf("got %s", got)
		}
		if err := os.WriteFile(r.conf.path, []byte("search b.test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if got := resolveString(r, "pbx", 7); got != "[192.0.2.1:7]" {
			t.Errorf("after a second: got %s", got)
		}
	})
}

// TestResolveAAndAAAATogether: A and AAAA are asked at once, so a dead
// first nameserver costs one wait, not two; addresses of both types come
// back, A first.
func TestResolveAAndAAAATogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		both := func(_ context.Context, q *dns.Msg, _ bool) (*dns.Msg, error) {
			m := new(dns.Msg).SetReply(q)
			rr, _ := dns.NewRR("pbx.test. 60 IN A 192.0.2.1")
			if q.Question[0].Qtype == dns.TypeAAAA {
				rr, _ = dns.NewRR("pbx.test. 60 IN AAAA 2001:db8::1")
			}
			m.Answer = []dns.RR{rr}
			return m, nil
		}
		f := &fakeNet{start: time.Now(), servers: map[string]behaviour{"a": silent, "b": both}}
		r := testResolver(t, []string{"a", "b"}, "", "", "")
		r.exchange = f.exchange
		got := resolveString(r, "pbx.test", 7)
		if took := time.Since(f.start); got != "[192.0.2.1:7 [2001:db8::1]:7]" || took != 100*time.Millisecond {
			t.Errorf("got %s after %v, want both after one wait of 100ms", got, took)
		}
	})
}
