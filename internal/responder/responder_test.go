package responder

import (
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

func TestAnswersTheProber(t *testing.T) {
	var mode atomic.Int32 // 0 answer, 1 drop, 2 answer 503
	r, err := Listen("127.0.0.1:0", func(netip.AddrPort) Action {
		switch mode.Load() {
		case 1:
			return Action{Drop: true}
		case 2:
			return Action{Code: 503}
		}
		return Action{}
	})
	p := proberFor(t, r, err)
	// An answered probe's bound only stops a broken run: a loopback
	// answer slowed by a loaded host is still an answer. The dropped
	// probe's bound is how long the test waits for its timeout.
	target := probe.Target{AoR: "a", URI: "sip:peer@" + r.Addr().String(), Timeout: 10 * time.Second}
	if res := p.Probe(t.Context(), target); res.Code != 200 || res.Reason != qualify.ReasonNone {
		t.Fatalf("answered probe: %+v", res)
	}
	mode.Store(2)
	if res := p.Probe(t.Context(), target); res.Code != 503 {
		t.Fatalf("503 probe: %+v", res)
	}
	mode.Store(1)
	target.Timeout = 300 * time.Millisecond
	if res := p.Probe(t.Context(), target); res.Reason != qualify.ReasonTimeout {
		t.Fatalf("dropped probe: %+v", res)
	}
	if a, d, _ := r.Counts(); a != 2 || d < 1 {
		t.Fatalf("counts answered=%d dropped=%d", a, d)
	}
}

// proberFor fails the test on err (r's Listen), else returns a prober on
// loopback; both are closed at the end of the test.
func proberFor(t *testing.T, r *Responder, err error) *sipprobe.Prober {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

const options = "OPTIONS sip:x@127.0.0.1 SIP/2.0\r\n" +
	"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK1;rport\r\n" +
	"v: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK0\r\n" +
	"f: <sip:q@127.0.0.1>;tag=1\r\n" +
	"To: <sip:x@127.0.0.1>\r\n" +
	"i: abc\r\n" +
	"CSeq: 7 OPTIONS\r\n" +
	"Content-Length: 0\r\n\r\n"

func TestResponseCopiesHeaders(t *testing.T) {
	req, ok := parseOptions([]byte(options))
	if !ok {
		t.Fatal("valid OPTIONS not parsed")
	}
	got := string(appendResponse(nil, req, 0))
	want := "SIP/2.0 200 OK\r\n" +
		"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK1;rport\r\n" +
		"Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK0\r\n" +
		"From: <sip:q@127.0.0.1>;tag=1\r\n" +
		"To: <sip:x@127.0.0.1>;tag=qualifyd-responder\r\n" +
		"Call-ID: abc\r\n" +
		"CSeq: 7 OPTIONS\r\n" +
		"Allow: OPTIONS\r\nContent-Length: 0\r\n\r\n"
	if got != want {
		t.Fatalf("response:\n%q\nwant\n%q", got, want)
	}
}

func TestIgnoresOtherMessages(t *testing.T) {
	for _, msg := range []string{
		"", "INVITE sip:x SIP/2.0\r\n\r\n", "SIP/2.0 200 OK\r\n\r\n",
		strings.Replace(options, "CSeq: 7 OPTIONS\r\n", "", 1), // no CSeq
		strings.TrimSuffix(options, "\r\n\r\n"),                // truncated
	} {
		if _, ok := parseOptions([]byte(msg)); ok {
			t.Errorf("accepted %q", msg)
		}
	}
}

func FuzzParseOptions(f *testing.F) {
	f.Add([]byte(options))
	f.Add([]byte("OPTIONS x\r\n:\r\n\r\n"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if req, ok := parseOptions(msg); ok {
			_ = appendResponse(nil, req, 200)
		}
	})
}

// TestListenTransactions checks that every datagram of one request (a
// prober's retransmissions) names one transaction, and the next request
// another: a script counts probes, not datagrams.
func TestListenTransactions(t *testing.T) {
	seen := make(chan string, 16)
	r, err := ListenTransactions("127.0.0.1:0", func(_ netip.AddrPort, tx string) Action {
		seen <- tx
		return Action{Drop: true}
	})
	p := proberFor(t, r, err)
	target := probe.Target{AoR: "a", URI: "sip:peer@" + r.Addr().String(), Timeout: 1200 * time.Millisecond}
	count := func() map[string]int {
		if res := p.Probe(t.Context(), target); res.Reason != qualify.ReasonTimeout {
			t.Fatalf("dropped probe: %+v", res)
		}
		txs := map[string]int{}
		for len(seen) > 0 {
			txs[<-seen]++
		}
		return txs
	}
	first, second := count(), count()
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("transactions per probe: %v, %v; want one each", first, second)
	}
	for tx, n := range first {
		if n < 2 {
			t.Errorf("the probe's %d datagrams, want its retransmissions too (T1 = 500 ms)", n)
		}
		if second[tx] != 0 {
			t.Errorf("two probes with one transaction %q", tx)
		}
	}
}
