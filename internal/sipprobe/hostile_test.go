package sipprobe

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestHostileResponses sends, before the genuine 200, responses that must
// not match: wrong branch, foreign branch, wrong Call-ID, wrong CSeq,
// spoofed source, truncated, oversized and garbage. On loopback datagrams
// are queued in send order, so all are handled before the 200
// (docs/qualify-semantics.md §3.4).
func TestHostileResponses(t *testing.T) {
	r, _ := newHostileResponder(t)
	p := newProber(t, Config{})
	res := p.Probe(t.Context(), target(uriOf(r, ""), 3*time.Second))
	if res.Code != 200 {
		t.Fatalf("got %+v, want the genuine 200", res)
	}
	want := Stats{Probes: 1, Matched: 1, DroppedLate: 2, DroppedMismatch: 2, DroppedWrongSource: 1,
		DroppedMalformed: 2, DroppedOversized: 1}
	if s := p.Stats(); s != want {
		t.Errorf("stats\n got %+v\nwant %+v", s, want)
	}
}

// newHostileResponder starts a UDP responder that answers with
// hostileReplies, and the socket it spoofs from.
func newHostileResponder(t *testing.T) (*responder, *net.UDPConn) {
	spoofer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spoofer.Close() })
	return newUDPResponder(t, hostileReplies(spoofer)), spoofer
}

// hostileReplies answers a request with two responses of unknown branches,
// two whose Call-ID or CSeq differ, the right one from spoofer, two
// malformed, one oversized, and then the right one.
func hostileReplies(spoofer *net.UDPConn) func(*exchange) {
	return func(x *exchange) {
		good := x.response(200)
		branch, _ := x.req.Via().Params.Get("branch")
		x.write(bytes.Replace(good, []byte(branch), []byte(branch[:len(branch)-1]+"x"), 1))
		x.write(bytes.Replace(good, []byte(branch), []byte("z9hG4bKforeign"), 1))
		x.write(bytes.Replace(good, []byte(x.req.CallID().Value()), []byte("other-call-id"), 1))
		x.write(bytes.Replace(good, []byte("1 OPTIONS"), []byte("2 OPTIONS"), 1))
		_, _ = spoofer.WriteToUDPAddrPort(good, x.src)
		x.write(good[:len(good)-10])
		x.write(append(bytes.Clone(good), bytes.Repeat([]byte("x"), 70000-len(good))...)[:9000])
		x.write([]byte("\x00\xffgarbage"))
		x.write(good)
	}
}

// TestLateAndDuplicate: a response after the timeout is late, a second
// copy of an answered response is a duplicate; neither matches
// (docs/qualify-semantics.md §3.2, §3.4).
func TestLateAndDuplicate(t *testing.T) {
	var pending [][]byte
	r := newUDPResponder(t, func(x *exchange) {
		switch x.req.Recipient.User {
		case "silent":
			pending = append(pending, x.response(200))
		case "answer":
			for _, old := range pending {
				x.write(old)
			}
			pending = append(pending[:0], x.response(200))
			x.write(pending[0])
		}
	})
	p := newProber(t, Config{})
	host := r.addr.String()
	if res := p.Probe(t.Context(), target("sip:silent@"+host, 200*time.Millisecond)); res.Reason != qualify.ReasonTimeout {
		t.Fatalf("got %+v, want timeout", res)
	}
	for range 2 {
		if res := p.Probe(t.Context(), target("sip:answer@"+host, 3*time.Second)); res.Code != 200 {
			t.Fatalf("got %+v, want 200", res)
		}
	}
	if s := p.Stats(); s.DroppedLate != 1 || s.DroppedDuplicate != 1 || s.Matched != 2 {
		t.Errorf("stats %+v, want 1 late, 1 duplicate, 2 matched", s)
	}
}

// TestOtherRequestsDropped: requests other than OPTIONS get no answer.
func TestOtherRequestsDropped(t *testing.T) {
	r := newUDPResponder(t, func(x *exchange) {
		if x.req.Method == sip.OPTIONS {
			x.reply(200)
		}
	})
	p := newProber(t, Config{})
	bye := "BYE sip:qd@" + p.Addr().String() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + r.addr.String() +
		";branch=z9hG4bKbye\r\nCall-ID: c\r\nCSeq: 1 BYE\r\nContent-Length: 0\r\n\r\n"
	if _, err := r.udp.WriteToUDPAddrPort([]byte(bye), p.Addr()); err != nil {
		t.Fatal(err)
	}
	if res := p.Probe(t.Context(), target(uriOf(r, ""), 3*time.Second)); res.Code != 200 {
		t.Fatalf("got %+v", res)
	}
	if s := p.Stats(); s.DroppedRequests != 1 || s.OptionsAnswered != 0 {
		t.Errorf("stats %+v", s)
	}
}
