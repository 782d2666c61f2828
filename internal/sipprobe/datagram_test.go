package sipprobe

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// answerLog is a stand-in for the engine behind AnswerDatagrams: it
// records each answer and replies with verdict; the Stats the prober had
// when the answer came go to stats, so that a test knows the counts of
// every earlier message.
type answerLog struct {
	verdict func(key uint64, a qualify.Answer) qualify.Match
	got     chan qualify.Answer
	stats   chan Stats
}

func newAnswerLog(p *Prober, verdict func(uint64, qualify.Answer) qualify.Match) *answerLog {
	l := &answerLog{verdict: verdict, got: make(chan qualify.Answer, 16), stats: make(chan Stats, 16)}
	p.AnswerDatagrams(func(key uint64, a qualify.Answer) qualify.Match {
		l.stats <- p.Stats()
		l.got <- a
		return l.verdict(key, a)
	})
	return l
}

func TestDatagramEligible(t *testing.T) {
	p := newProber(t, Config{})
	for _, c := range []struct {
		uri  string
		opts *qualify.ProbeOptions
		dest string // "" when not a datagram probe
	}{
		{"sip:pbx@192.0.2.7:5080", nil, "192.0.2.7:5080"},
		{"sip:192.0.2.7", &qualify.ProbeOptions{FromUser: "q"}, "192.0.2.7:5060"},
		{"sip:pbx@[2001:db8::1]:5062", nil, "[2001:db8::1]:5062"},
		{"sip:pbx@pbx.example.com", nil, ""},
		{"sip:pbx@192.0.2.7;transport=tcp", nil, ""},
		{"sips:pbx@192.0.2.7", nil, ""},
		{"sip:pbx@192.0.2.7", &qualify.ProbeOptions{Transport: "tls"}, ""},
		{"sip:pbx@192.0.2.7", &qualify.ProbeOptions{OutboundProxy: "sip:192.0.2.1"}, ""},
		{"sip:pbx@192.0.2.7", &qualify.ProbeOptions{Auth: qualify.Credentials{Username: "u", Password: "p"}}, ""},
	} {
		dest, ok := p.Datagram(qualify.Target{URI: c.uri, Options: c.opts})
		if ok != (c.dest != "") || (ok && dest.String() != c.dest) {
			t.Errorf("Datagram(%s, %+v) = %v, %v; want %q", c.uri, c.opts, dest, ok, c.dest)
		}
	}
}

func TestDatagramTimerE(t *testing.T) {
	r := newUDPResponder(t, nil) // silent
	p := newProber(t, Config{})
	tg := target(uriOf(r, ""), 10*time.Second)
	const key = 0x1234_5678_0000_0007
	for _, c := range []struct {
		elapsed    time.Duration
		proceeding bool
		wait       time.Duration
	}{
		{0, false, T1},
		{T1, false, 2 * T1},
		{3 * T1, false, 4 * T1},
		{7 * T1, false, T2},
		{T1, true, T2},
		{9900 * time.Millisecond, false, 100 * time.Millisecond}, // cut at the timeout
	} {
		wait, res, done := p.Step(tg, key, c.elapsed, c.proceeding)
		if done || wait != c.wait {
			t.Fatalf("Step at %v (proceeding %v) = %v, %+v, %v; want to wait %v", c.elapsed, c.proceeding, wait, res, done, c.wait)
		}
	}
	// Every send is the same request: branch, Call-ID, tags, CSeq.
	first := r.next(t)
	branch, _ := first.Via().Params.Get("branch")
	k, ok := branchKey([]byte(branch))
	if !ok || k != key|datagramBit {
		t.Fatalf("branch %q: key %x, want %x", branch, k, uint64(key|datagramBit))
	}
	for range 5 {
		again := r.next(t)
		if again.String() != first.String() {
			t.Fatalf("a retransmission differs:\n%s\nfirst:\n%s", again, first)
		}
	}
	_, res, done := p.Step(tg, key, 10*time.Second, false)
	if !done || res.Reason != qualify.ReasonTimeout || res.Dest != r.addr || res.Transport != "udp" {
		t.Fatalf("Step at the timeout = %+v, %v; want a timeout to %v", res, done, r.addr)
	}
	if s := p.Stats(); s.Probes != 1 || s.Retransmissions != 5 || s.Timeouts != 1 {
		t.Errorf("stats %+v, want 1 probe, 5 retransmissions, 1 timeout", s)
	}
}

func TestDatagramAnswered(t *testing.T) {
	r := newUDPResponder(t, func(x *exchange) {
		x.reply(100)
		x.reply(200)
		x.reply(200) // a duplicate
	})
	p := newProber(t, Config{})
	answered := map[uint64]bool{}
	log := newAnswerLog(p, func(key uint64, a qualify.Answer) qualify.Match {
		if answered[key] {
			return qualify.MatchLate
		}
		answered[key] = a.Code >= 200
		return qualify.Matched
	})
	before := time.Now()
	for _, key := range []uint64{0x0bad_cafe_0000_0003, 0x0bad_cafe_0000_0004} {
		if _, _, done := p.Step(target(uriOf(r, ""), 3*time.Second), key, 0, false); done {
			t.Fatal("the probe ended at its first send")
		}
		for _, code := range []int{100, 200, 200} {
			a := <-log.got
			if a.Code != code || a.From != r.addr || a.At.Before(before) {
				t.Fatalf("answer %+v, want %d from %v", a, code, r.addr)
			}
		}
	}
	// When the second probe's first answer came, the first probe's three
	// were counted.
	<-log.stats
	<-log.stats
	<-log.stats
	if s := <-log.stats; s.Provisional != 1 || s.Matched != 1 || s.DroppedDuplicate != 1 || s.DroppedLate != 0 {
		t.Fatalf("stats after one probe's answers: %+v, want 1 provisional, 1 matched, 1 duplicate", s)
	}
}

func TestDatagramHostileResponses(t *testing.T) {
	r, spoofer := newHostileResponder(t)
	p := newProber(t, Config{})
	log := newAnswerLog(p, func(_ uint64, a qualify.Answer) qualify.Match {
		if a.From != r.addr {
			return qualify.MatchWrongSource
		}
		return qualify.Matched
	})
	p.Step(target(uriOf(r, ""), 3*time.Second), 0x42<<32|5, 0, false)
	if a := <-log.got; a.From != netip.AddrPortFrom(r.addr.Addr(), spoofer.LocalAddr().(*net.UDPAddr).AddrPort().Port()) {
		t.Fatalf("first answer to reach the engine: %+v, want the spoofed one", a)
	}
	if a := <-log.got; a.From != r.addr || a.Code != 200 {
		t.Fatalf("second answer %+v, want the genuine 200", a)
	}
	<-log.stats
	// The counts when the genuine answer came: everything before it.
	want := Stats{Probes: 1, DroppedLate: 2, DroppedMismatch: 2, DroppedWrongSource: 1, DroppedMalformed: 2, DroppedOversized: 1}
	if s := <-log.stats; s != want {
		t.Errorf("stats\n got %+v\nwant %+v", s, want)
	}
}

func TestDatagramSendFails(t *testing.T) {
	p := newProber(t, Config{})
	// An IPv6 destination from a socket bound to an IPv4 address.
	_, res, done := p.Step(target("sip:pbx@[2001:db8::1]:5060", time.Second), 9, 0, false)
	if !done || res.Reason != qualify.ReasonTransport || res.Detail == "" {
		t.Fatalf("Step = %+v, %v; want a transport failure", res, done)
	}
	// A failed retransmission does not end the probe: the answer to the
	// first send may still come.
	wait, res, done := p.Step(target("sip:pbx@[2001:db8::1]:5060", 3*time.Second), 9, T1, false)
	if done || wait != 2*T1 {
		t.Fatalf("retransmission Step = %v, %+v, %v; want to wait %v", wait, res, done, 2*T1)
	}
	if s := p.Stats(); s.TransportErrors != 1 || s.Retransmissions != 1 {
		t.Errorf("stats %+v, want 1 transport error, 1 retransmission", s)
	}
}
