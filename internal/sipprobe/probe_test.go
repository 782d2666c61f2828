package sipprobe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// newProber starts a Prober on 127.0.0.1 that the test closes.
func newProber(t *testing.T, cfg Config) *Prober {
	t.Helper()
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func target(uri string, timeout time.Duration) probe.Target {
	return probe.Target{AoR: "test", URI: uri, Timeout: timeout}
}

func uriOf(r *responder, params string) string {
	return fmt.Sprintf("sip:pbx@%s%s", r.addr, params)
}

// TestProbeAnswered: a final response of any class ends the probe with
// its code and RTT, through Probe and through Start alike.
func TestProbeAnswered(t *testing.T) {
	ways := map[string]func(*testing.T, *Prober, probe.Target) qualify.Result{
		"Probe": func(t *testing.T, p *Prober, tg probe.Target) qualify.Result { return p.Probe(t.Context(), tg) },
		"Start": func(t *testing.T, p *Prober, tg probe.Target) qualify.Result {
			return startAndWait(t, t.Context(), p, tg)
		},
	}
	for way, probe := range ways {
		for _, code := range []int{200, 404, 503} {
			t.Run(fmt.Sprint(way, code), func(t *testing.T) {
				r := newUDPResponder(t, func(x *exchange) { x.reply(code) })
				p := newProber(t, Config{})
				res := probe(t, p, target(uriOf(r, ""), 3*time.Second))
				if res.Reason != qualify.ReasonNone || res.Code != code || res.RTT <= 0 || res.Sent.IsZero() {
					t.Fatalf("got %+v, want code %d with an RTT", res, code)
				}
				if want := "udp " + r.addr.String(); res.Addr() != want {
					t.Errorf("Addr = %q, want %q", res.Addr(), want)
				}
				if s := p.Stats(); s.Probes != 1 || s.Matched != 1 {
					t.Errorf("stats %+v", s)
				}
			})
		}
	}
}

// TestRequestHeaders checks the request against RFC 3261 section 8.1.1 and
// the issue: fresh branch with the magic cookie and 16 hex digits, rport,
// Max-Forwards 70, To = contact, From with tag, User-Agent.
func TestRequestHeaders(t *testing.T) {
	r := newUDPResponder(t, func(x *exchange) { x.reply(200) })
	p := newProber(t, Config{UserAgent: "ua-test", FromUser: "qd", FromDomain: "example.org"})
	uri := uriOf(r, "")
	seen := map[string]bool{}
	for range 3 {
		if res := p.Probe(t.Context(), target(uri, 3*time.Second)); res.Code != 200 {
			t.Fatalf("got %+v", res)
		}
		req := r.next(t)
		via := req.Via()
		branch, _ := via.Params.Get("branch")
		if !strings.HasPrefix(branch, "z9hG4bK") || len(branch) < len("z9hG4bK")+16 {
			t.Errorf("branch %q: no magic cookie or too short", branch)
		}
		if _, ok := via.Params.Get("rport"); !ok || via.Transport != "UDP" {
			t.Errorf("Via %q: want UDP with rport", via.Value())
		}
		if want := p.Addr().String(); via.Host+":"+fmt.Sprint(via.Port) != want {
			t.Errorf("Via sent-by %s:%d, want %s", via.Host, via.Port, want)
		}
		checkHeaders(t, req, uri)
		for _, id := range []string{branch, req.CallID().Value(), mustTag(t, req)} {
			if seen[id] {
				t.Errorf("%q reused across probes", id)
			}
			seen[id] = true
		}
	}
}

func checkHeaders(t *testing.T, req *sip.Request, uri string) {
	t.Helper()
	want := map[string]string{
		"Max-Forwards": "70", "User-Agent": "ua-test", "CSeq": "1 OPTIONS",
		"To": "<" + uri + ">", "Content-Length": "0",
	}
	for name, v := range want {
		if h := req.GetHeader(name); h == nil || h.Value() != v {
			t.Errorf("%s = %v, want %q", name, h, v)
		}
	}
	if req.Method != sip.OPTIONS || req.Recipient.String() != uri {
		t.Errorf("request line %s %s", req.Method, req.Recipient.String())
	}
	if from := req.From(); from.Address.User != "qd" || from.Address.Host != "example.org" {
		t.Errorf("From %q", from.Value())
	}
}

func mustTag(t *testing.T, req *sip.Request) string {
	tag, ok := req.From().Params.Get("tag")
	if !ok || tag == "" {
		t.Fatalf("From without tag: %q", req.From().Value())
	}
	return tag
}

// TestSilentPeerRetransmits checks Timer E against a silent peer: with a
// 2.5 s deadline the request is sent at 0, 0.5 and 1.5 s (the next would
// be at 3.5 s), then times out (docs/qualify-semantics.md §3.2). The
// deadline falls a second from either send, so that real timers late on
// a loaded host keep the count; TestTimerE holds the exact times in
// virtual time.
func TestSilentPeerRetransmits(t *testing.T) {
	r := newUDPResponder(t, nil)
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target(uriOf(r, ""), 2500*time.Millisecond))
	if res.Reason != qualify.ReasonTimeout || res.Code != 0 {
		t.Fatalf("got %+v, want timeout", res)
	}
	if s := p.Stats(); s.Retransmissions != 2 || s.Timeouts != 1 {
		t.Errorf("stats %+v, want 2 retransmissions and 1 timeout", s)
	}
	first := r.next(t)
	for range 2 {
		if again := r.next(t); again.String() != first.String() {
			t.Errorf("retransmission differs:\n%s\n%s", again, first)
		}
	}
}

// TestProvisionalIgnored: 1xx neither completes nor extends the probe
// (docs/qualify-semantics.md §3.2, §4).
func TestProvisionalIgnored(t *testing.T) {
	r := newUDPResponder(t, func(x *exchange) {
		x.reply(100)
		x.reply(180)
		if x.req.CSeq().SeqNo == 1 && strings.Contains(x.req.Recipient.User, "answer") {
			x.reply(200)
		}
	})
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target("sip:answer@"+r.addr.String(), 3*time.Second))
	if res.Code != 200 || res.Reason != qualify.ReasonNone {
		t.Fatalf("got %+v, want 200", res)
	}
	res = p.Probe(t.Context(), target("sip:silent@"+r.addr.String(), 300*time.Millisecond))
	if res.Reason != qualify.ReasonTimeout {
		t.Fatalf("got %+v, want timeout", res)
	}
	if s := p.Stats(); s.Provisional < 4 || s.Matched != 1 {
		t.Errorf("stats %+v, want >= 4 provisional and 1 matched", s)
	}
}

// TestContextCancel: a cancelled probe returns at once, reason timeout.
func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := newUDPResponder(t, func(*exchange) { cancel() })
	p := newProber(t, Config{})
	res := p.Probe(ctx, target(uriOf(r, ""), time.Hour))
	if res.Reason != qualify.ReasonTimeout || res.Detail != "canceled" {
		t.Fatalf("got %+v, want timeout (canceled)", res)
	}
}

// TestClose: probes in flight fail with transport, Close is idempotent,
// and Probe after Close fails at once.
func TestClose(t *testing.T) {
	p := newProber(t, Config{})
	r := newUDPResponder(t, func(*exchange) { go p.Close() })
	res := p.Probe(t.Context(), target(uriOf(r, ""), time.Hour))
	if res.Reason != qualify.ReasonTransport {
		t.Fatalf("in flight: got %+v, want transport", res)
	}
	_ = p.Close()
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if res := p.Probe(t.Context(), target(uriOf(r, ""), time.Second)); res.Reason != qualify.ReasonTransport {
		t.Errorf("after Close: got %+v, want transport", res)
	}
}

func TestInvalidURI(t *testing.T) {
	p := newProber(t, Config{})
	for _, uri := range []string{"", "http://x", "sip:", "sip:a@b;transport=sctp"} {
		if res := p.Probe(t.Context(), target(uri, time.Second)); res.Reason != qualify.ReasonTransport || res.Detail == "" {
			t.Errorf("%q: got %+v, want transport with detail", uri, res)
		}
	}
}

// TestUnresolvedNote: the configuration's note on an undefined transport
// or auth is added to a failure's detail, and to an answer of 300 or
// more, never to a success (qualify-semantics §3.1).
func TestUnresolvedNote(t *testing.T) {
	const note = `transport "ipv4" is not defined: sent by the contact URI alone, as Asterisk does`
	p := newProber(t, Config{})
	for _, code := range []int{200, 503} {
		r := newUDPResponder(t, func(x *exchange) { x.reply(code) })
		tg := target(uriOf(r, ""), 3*time.Second)
		tg.Options = &probe.Options{Unresolved: note}
		res := p.Probe(t.Context(), tg)
		want := ""
		if code >= 300 {
			want = note
		}
		if res.Code != code || res.Detail != want {
			t.Errorf("answered %d: got code %d detail %q, want %q", code, res.Code, res.Detail, want)
		}
	}
	tg := target("sip:a@b;transport=sctp", time.Second)
	tg.Options = &probe.Options{Unresolved: note}
	res := p.Probe(t.Context(), tg)
	if want := `URI "sip:a@b;transport=sctp": transport "sctp" is not one a probe is sent over (udp, tcp or tls); ` + note; res.Detail != want {
		t.Errorf("transport failure: detail %q, want %q", res.Detail, want)
	}
}

// TestOutboundProxy: the request goes to the proxy, R-URI stays the
// contact, and a loose Route names the proxy.
func TestOutboundProxy(t *testing.T) {
	proxy := newUDPResponder(t, func(x *exchange) { x.reply(200) })
	p := newProber(t, Config{})
	contact := "sip:pbx@127.0.0.1:9"
	tg := target(contact, 3*time.Second)
	tg.Options = &probe.Options{OutboundProxy: "sip:" + proxy.addr.String()}
	if res := p.Probe(t.Context(), tg); res.Code != 200 || res.Addr() != "udp "+proxy.addr.String() {
		t.Fatalf("got %+v", res)
	}
	req := proxy.next(t)
	if req.Recipient.String() != contact {
		t.Errorf("R-URI %s, want %s", req.Recipient.String(), contact)
	}
	if h := req.GetHeader("Route"); h == nil || h.Value() != "<sip:"+proxy.addr.String()+";lr>" {
		t.Errorf("Route %v", h)
	}
}

// TestIncomingOptionsAnswered: a peer qualifying us gets 200 OK.
func TestIncomingOptionsAnswered(t *testing.T) {
	p := newProber(t, Config{})
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	raw := "OPTIONS sip:qd@" + p.Addr().String() + " SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP " + peer.LocalAddr().String() + ";branch=z9hG4bKpeer1;rport\r\n" +
		"From: <sip:peer@x>;tag=1\r\nTo: <sip:qd@x>\r\nCall-ID: peer-call\r\nCSeq: 7 OPTIONS\r\n" +
		"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
	if _, err := peer.WriteToUDPAddrPort([]byte(raw), p.Addr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err := peer.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := sip.ParseMessage(buf[:n])
	res, ok := msg.(*sip.Response)
	if err != nil || !ok {
		t.Fatalf("reply %q: %v", buf[:n], err)
	}
	if res.StatusCode != 200 || res.CallID().Value() != "peer-call" || res.CSeq().Value() != "7 OPTIONS" {
		t.Fatalf("reply %s", res)
	}
	if s := p.Stats(); s.OptionsAnswered != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestSentBy: bound to all interfaces, the Via carries the address the
// kernel sends from (the real sent-by), for IPv4 and IPv6 contacts.
func TestSentBy(t *testing.T) {
	p := newProber(t, Config{ListenAddr: ":0"})
	for _, ip := range []string{"127.0.0.1", "::1"} {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
		if err != nil {
			t.Fatal(err)
		}
		r := &responder{t: t, udp: c, got: make(chan *sip.Request, 16),
			addr: c.LocalAddr().(*net.UDPAddr).AddrPort(), handle: func(x *exchange) { x.reply(200) }}
		r.wg.Add(1)
		go r.serveUDP()
		t.Cleanup(func() { _ = c.Close(); r.wg.Wait() })
		if res := p.Probe(t.Context(), target(uriOf(r, ""), 3*time.Second)); res.Code != 200 {
			t.Fatalf("%s: got %+v", ip, res)
		}
		via := r.next(t).Via()
		want := netip.AddrPortFrom(netip.MustParseAddr(ip), p.Addr().Port()).String()
		if got := netip.AddrPortFrom(netip.MustParseAddr(via.Host), uint16(via.Port)).String(); got != want {
			t.Errorf("sent-by %s, want %s", got, want)
		}
	}
}

// TestSendFails: a probe whose first send fails ends at once with reason
// transport (here an IPv6 destination from a socket bound to IPv4).
func TestSendFails(t *testing.T) {
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target("sip:pbx@[2001:db8::1]:5060", time.Hour))
	if res.Reason != qualify.ReasonTransport || res.Detail != "send failed" || res.Addr() != "udp [2001:db8::1]:5060" {
		t.Fatalf("got %+v, want a transport failure (send failed) to udp [2001:db8::1]:5060", res)
	}
	if s := p.Stats(); s.Probes != 1 || s.TransportErrors != 1 || s.Timeouts != 0 {
		t.Errorf("stats %+v, want 1 probe, 1 transport error", s)
	}
}

// TestUDPICMPErrorIsATimeout: a UDP probe to a closed port draws an ICMP
// port unreachable on loopback, which the unconnected socket never sees:
// the probe times out, as docs/qualify-semantics.md §3.2 says (and as
// Asterisk's does).
func TestUDPICMPErrorIsATimeout(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	closed := c.LocalAddr().String()
	c.Close()
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target("sip:pbx@"+closed, 300*time.Millisecond))
	if res.Reason != qualify.ReasonTimeout || res.Detail != "" {
		t.Fatalf("got %+v, want a timeout", res)
	}
}

// TestProbeRetryAfter: a 503's Retry-After reaches the result in whole
// seconds, a comment and parameters after it ignored, 65535 s at most
// (qualify-semantics §11.4); another code's is not kept.
func TestProbeRetryAfter(t *testing.T) {
	for _, c := range []struct {
		code  int
		value string
		want  time.Duration
	}{
		{503, "20", 20 * time.Second},
		{503, "120 (maintenance);duration=3600", 120 * time.Second},
		{503, "9999999", 65535 * time.Second},
		{503, "soon", 0},
		{486, "20", 0},
	} {
		t.Run(fmt.Sprint(c.code, c.value), func(t *testing.T) {
			r := newUDPResponder(t, func(x *exchange) {
				x.reply(c.code, func(res *sip.Response) { res.AppendHeader(sip.NewHeader("Retry-After", c.value)) })
			})
			p := newProber(t, Config{})
			res := p.Probe(t.Context(), target(uriOf(r, ""), 3*time.Second))
			if res.Code != c.code || res.RetryAfter != c.want {
				t.Fatalf("got code %d Retry-After %v, want %d %v", res.Code, res.RetryAfter, c.code, c.want)
			}
		})
	}
}
