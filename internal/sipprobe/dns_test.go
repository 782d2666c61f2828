package sipprobe

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// dnsServer is an authoritative test server on loopback, over UDP and TCP
// on one port, answering from a fixed record set; everything else is
// NXDOMAIN. A non-zero rcode answers every query with it instead; with
// truncate, every UDP answer is empty with the TC bit set.
type dnsServer struct {
	addr     string
	queries  atomic.Int64 // UDP and TCP
	tcp      atomic.Int64
	rcode    atomic.Int32
	truncate atomic.Bool
	mu       sync.Mutex
	records  map[string][]dns.RR // by "name type"
}

func newDNSServer(t *testing.T, rrs ...string) *dnsServer {
	t.Helper()
	s := &dnsServer{records: make(map[string][]dns.RR)}
	for _, text := range rrs {
		rr, err := dns.NewRR(text)
		if err != nil {
			t.Fatal(err)
		}
		key := rr.Header().Name + " " + dns.TypeToString[rr.Header().Rrtype]
		s.records[key] = append(s.records[key], rr)
	}
	pc, ln := listenUDPTCP(t)
	s.addr = pc.LocalAddr().String()
	serveDNS(t, &dns.Server{PacketConn: pc, Handler: s})
	serveDNS(t, &dns.Server{Listener: ln, Handler: s})
	return s
}

// listenUDPTCP binds a UDP socket and a TCP listener on one loopback port.
func listenUDPTCP(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err == nil {
			return pc, ln
		}
		ln.Close() // the UDP port is taken: another
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return nil, nil
}

func serveDNS(t *testing.T, srv *dns.Server) {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	overTCP := w.RemoteAddr().Network() == "tcp"
	if overTCP {
		s.tcp.Add(1)
	}
	m := new(dns.Msg).SetReply(req)
	m.Authoritative = true
	q := req.Question[0]
	switch {
	case s.rcode.Load() != 0:
		m.Rcode = int(s.rcode.Load())
	case s.truncate.Load() && !overTCP:
		m.Truncated = true
	default:
		s.mu.Lock()
		m.Answer = s.records[strings.ToLower(q.Name)+" "+dns.TypeToString[q.Qtype]]
		s.mu.Unlock()
		if len(m.Answer) == 0 && !s.known(q.Name) {
			m.Rcode = dns.RcodeNameError
		}
	}
	_ = w.WriteMsg(m)
}

// known reports whether any record exists for name.
func (s *dnsServer) known(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.records {
		if strings.HasPrefix(key, strings.ToLower(name)+" ") {
			return true
		}
	}
	return false
}

func portOf(ap netip.AddrPort) string { return strconv.Itoa(int(ap.Port())) }

// TestDNSSRVAllTargets: every SRV target is probed; the contact succeeds
// because one answers, and each target is reported
// (docs/qualify-semantics.md §3.6).
func TestDNSSRVAllTargets(t *testing.T) {
	silent := newUDPResponder(t, nil)
	live := newUDPResponder(t, func(x *exchange) { x.reply(200) })
	d := newDNSServer(t,
		"_sip._udp.pbx.test. 60 IN SRV 10 50 "+portOf(silent.addr)+" a.pbx.test.",
		"_sip._udp.pbx.test. 60 IN SRV 20 50 "+portOf(live.addr)+" b.pbx.test.",
		"a.pbx.test. 60 IN A 127.0.0.1", "b.pbx.test. 60 IN A 127.0.0.1")
	p := newProber(t, Config{Resolver: d.addr})
	res := p.Probe(t.Context(), target("sip:trunk@pbx.test", 500*time.Millisecond))
	if res.Code != 200 || res.Addr() != "udp "+live.addr.String() || res.DNS <= 0 {
		t.Fatalf("got %+v, want 200 from %s", res, live.addr)
	}
	if len(res.Targets) != 2 || res.Targets[0].Reason != qualify.ReasonTimeout ||
		res.Targets[0].Addr() != "udp "+silent.addr.String() || res.Targets[1].Code != 200 {
		t.Errorf("targets %+v", res.Targets)
	}
}

// TestDNSExplicitPortCached: a host with a port is looked up as A/AAAA
// only, and the answers are cached for their TTL.
func TestDNSExplicitPortCached(t *testing.T) {
	live := newUDPResponder(t, func(x *exchange) { x.reply(200) })
	d := newDNSServer(t, "host.test. 60 IN A 127.0.0.1")
	p := newProber(t, Config{Resolver: d.addr})
	for range 3 {
		res := p.Probe(t.Context(), target("sip:trunk@host.test:"+portOf(live.addr), 3*time.Second))
		if res.Code != 200 || res.Targets != nil {
			t.Fatalf("got %+v", res)
		}
	}
	if q := d.queries.Load(); q != 2 {
		t.Errorf("%d queries, want 2 (A and AAAA once)", q)
	}
}

// TestDNSTCP: transport=tcp looks up _sip._tcp.
func TestDNSTCP(t *testing.T) {
	live := newStreamResponder(t, nil, func(x *exchange) { x.reply(200) })
	d := newDNSServer(t, "_sip._tcp.tcp.test. 60 IN SRV 0 0 "+portOf(live.addr)+" srv.tcp.test.",
		"srv.tcp.test. 60 IN A 127.0.0.1")
	p := newProber(t, Config{Resolver: d.addr})
	res := p.Probe(t.Context(), target("sip:trunk@tcp.test;transport=tcp", 3*time.Second))
	if res.Code != 200 || res.Addr() != "tcp "+live.addr.String() {
		t.Fatalf("got %+v", res)
	}
}

// TestDNSFailure: a name that does not resolve fails the probe with
// reason dns before anything is sent, and the detail says what was tried
// (docs/qualify-semantics.md §3.6).
func TestDNSFailure(t *testing.T) {
	d := newDNSServer(t, "other.test. 60 IN A 127.0.0.1")
	dead := deadServer(t)
	files := testFiles(t, "", "", "")
	for _, tc := range []struct {
		name, server string
		timeout      time.Duration
		detail       string
	}{
		{"nxdomain", d.addr, 0, "missing.test: no SRV, A or AAAA records"},
		{"silent", dead, 300 * time.Millisecond, "missing.test: no answer from " + dead + " (timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProber(t, Config{Resolver: tc.server, DNSTimeout: tc.timeout,
				ResolvConf: files.resolvConf, HostsFile: files.hosts, NSSwitchConf: files.nsswitch})
			res := p.Probe(t.Context(), target("sip:trunk@missing.test", 3*time.Second))
			if res.Reason != qualify.ReasonDNS || res.Detail != tc.detail || !res.Sent.IsZero() {
				t.Fatalf("got %+v, want dns with detail %q", res, tc.detail)
			}
		})
	}
}

// TestResolveOrder checks RFC 3263 target selection without probing.
func TestResolveOrder(t *testing.T) {
	rrs := []string{
		"_sips._tcp.s.test. 60 IN SRV 20 0 5001 b.s.test.",
		"_sips._tcp.s.test. 60 IN SRV 10 0 5002 a.s.test.",
		"a.s.test. 60 IN AAAA ::1", "b.s.test. 60 IN A 127.0.0.2",
		"plain.test. 60 IN A 127.0.0.3", "plain.test. 60 IN AAAA ::3",
	}
	var many []netip.AddrPort // more A records than targets probed
	for i := range maxTargets + 4 {
		a := netip.AddrFrom4([4]byte{127, 0, 1, byte(i + 1)})
		many = append(many, netip.AddrPortFrom(a, 7))
		rrs = append(rrs, "many.test. 60 IN A "+a.String())
	}
	d := newDNSServer(t, rrs...)
	r := newResolver(d.addr, testFiles(t, "", "", ""))
	cases := []struct {
		host string
		port uint16
		tr   transport
		want string
	}{
		{"s.test", 0, tlsTransport, "[[::1]:5002 127.0.0.2:5001]"},
		{"plain.test", 0, udp, "[127.0.0.3:5060 [::3]:5060]"},
		{"plain.test", 0, tlsTransport, "[127.0.0.3:5061 [::3]:5061]"},
		{"plain.test", 7, tcp, "[127.0.0.3:7 [::3]:7]"},
		{"many.test", 7, udp, fmt.Sprint(many[:maxTargets])},
	}
	for _, tc := range cases {
		got, err := r.resolve(t.Context(), tc.host, tc.port, tc.tr)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s:%d %v: got %v, %v, want %s", tc.host, tc.port, tc.tr, got, err, tc.want)
		}
	}
}

// TestResolveSRVTargetsBounded: of an SRV set larger than maxTargets only
// the first maxTargets targets are looked up, each with one A and one
// AAAA query, however many the answer holds.
func TestResolveSRVTargetsBounded(t *testing.T) {
	var rrs []string
	for i := range maxTargets + 4 {
		rrs = append(rrs, fmt.Sprintf("_sip._udp.big.test. 60 IN SRV %d 0 5060 t%d.big.test.", i, i))
	}
	rrs = append(rrs, fmt.Sprintf("t%d.big.test. 60 IN A 127.0.0.1", maxTargets)) // the 17th
	d := newDNSServer(t, rrs...)
	r := newResolver(d.addr, testFiles(t, "", "", ""))
	got, err := r.resolve(t.Context(), "big.test", 0, udp)
	if err == nil || d.queries.Load() != 1+2*maxTargets {
		t.Errorf("got %v, %v after %d queries, want no records after %d", got, err, d.queries.Load(), 1+2*maxTargets)
	}
}
