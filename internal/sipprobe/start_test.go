package sipprobe

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/emiago/sipgo/sip"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// startAndWait runs Start and waits for its result, which must come
// with the probe's tag.
func startAndWait(tb testing.TB, ctx context.Context, p *Prober, t probe.Target) qualify.Result {
	tb.Helper()
	const tag = 0xfeedface0042
	ch := make(chan qualify.Result, 1)
	tags := make(chan uint64, 1)
	p.Start(ctx, t, tag, func(got uint64, r qualify.Result) { tags <- got; ch <- r })
	if got := <-tags; got != tag {
		tb.Errorf("result with tag %#x, want %#x", got, uint64(tag))
	}
	return <-ch
}

// TestStartRetransmitsAndTimesOut: a silent peer gets the Timer E
// retransmissions of a probe, then the probe times out.
func TestStartRetransmitsAndTimesOut(t *testing.T) {
	r := newUDPResponder(t, func(*exchange) {})
	p := newProber(t, Config{})
	start := time.Now()
	res := startAndWait(t, t.Context(), p, target(uriOf(r, ""), 1200*time.Millisecond))
	if res.Reason != qualify.ReasonTimeout || time.Since(start) < 1200*time.Millisecond {
		t.Fatalf("got %+v after %v, want a timeout after 1.2 s", res, time.Since(start))
	}
	if s := p.Stats(); s.Probes != 1 || s.Retransmissions != 1 || s.Timeouts != 1 {
		t.Errorf("stats %+v, want 1 probe, 1 retransmission (at 500 ms), 1 timeout", s)
	}
}

func TestStartCanceled(t *testing.T) {
	r := newUDPResponder(t, func(*exchange) {})
	p := newProber(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan qualify.Result, 2)
	for range 2 {
		p.Start(ctx, target(uriOf(r, ""), time.Hour), 0, func(_ uint64, r qualify.Result) { ch <- r })
	}
	cancel()
	for range 2 {
		if res := <-ch; res.Reason != qualify.ReasonTimeout || res.Detail != "canceled" {
			t.Fatalf("got %+v, want canceled", res)
		}
	}
	if res := startAndWait(t, ctx, p, target(uriOf(r, ""), time.Hour)); res.Detail != "canceled" {
		t.Fatalf("probe with a cancelled context: %+v", res)
	}
}

func TestStartClosed(t *testing.T) {
	r := newUDPResponder(t, func(*exchange) {})
	p := newProber(t, Config{})
	ch := make(chan qualify.Result, 1)
	p.Start(t.Context(), target(uriOf(r, ""), time.Hour), 0, func(_ uint64, r qualify.Result) { ch <- r })
	_ = p.Close()
	if res := <-ch; res.Reason != qualify.ReasonTransport {
		t.Fatalf("probe in flight at Close: %+v", res)
	}
	if res := startAndWait(t, t.Context(), p, target(uriOf(r, ""), time.Hour)); res.Reason != qualify.ReasonTransport {
		t.Fatalf("probe after Close: %+v", res)
	}
}

// TestStartOtherRoutes: targets that are not a datagram to an address
// (here a bad URI and a TCP peer) still get exactly one result.
func TestStartOtherRoutes(t *testing.T) {
	p := newProber(t, Config{})
	if res := startAndWait(t, t.Context(), p, target("mailto:x", time.Second)); res.Reason != qualify.ReasonTransport {
		t.Fatalf("bad URI: %+v", res)
	}
	r := newStreamResponder(t, nil, func(x *exchange) { x.reply(200) })
	if res := startAndWait(t, t.Context(), p, target(uriOf(r, ";transport=tcp"), 3*time.Second)); res.Code != 200 {
		t.Fatalf("TCP peer: %+v", res)
	}
}

// TestStartNoGoroutinePerProbe keeps 2,000 probes in flight to a
// silent peer without a goroutine each, and gets every result once.
func TestStartNoGoroutinePerProbe(t *testing.T) {
	r := newUDPResponder(t, func(*exchange) {})
	p := newProber(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	before := runtime.NumGoroutine()
	const n = 2000
	var wg sync.WaitGroup
	wg.Add(n)
	var mu sync.Mutex
	results := make(map[uint64]int)
	for i := range n {
		p.Start(ctx, target(uriOf(r, ""), time.Hour), uint64(i), func(tag uint64, _ qualify.Result) {
			mu.Lock()
			results[tag]++
			mu.Unlock()
			wg.Done()
		})
	}
	if g := runtime.NumGoroutine(); g > before+10 {
		t.Errorf("%d goroutines with %d probes in flight, %d before", g, n, before)
	}
	cancel()
	wg.Wait()
	for i := range uint64(n) {
		if results[i] != 1 {
			t.Fatalf("probe %d: %d results, want 1 (tags seen: %d)", i, results[i], len(results))
		}
	}
}

// TestNoGoroutineWaitsForAResponse: probes over TCP and probes that
// answer a digest challenge wait for their responses in the table, as UDP
// probes do: a goroutine runs only for a dial or a write.
func TestNoGoroutineWaitsForAResponse(t *testing.T) {
	const n = 200
	tcp := newStreamResponder(t, nil, nil) // silent
	retried := map[string]bool{}           // Call-IDs: the responder's goroutine only
	challenged := make(chan struct{})      // closed when every probe's retry came
	digest := newUDPResponder(t, func(x *exchange) {
		if x.req.GetHeader("Authorization") != nil && !retried[x.req.CallID().Value()] {
			if retried[x.req.CallID().Value()] = true; len(retried) == n {
				close(challenged)
			}
		}
		if x.req.GetHeader("Authorization") == nil {
			x.reply(401, func(r *sip.Response) {
				r.AppendHeader(sip.NewHeader("WWW-Authenticate", `Digest realm="lab", nonce="n", qop="auth"`))
			})
		}
	})
	p := newProber(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	wg.Add(2 * n)
	done := func(uint64, qualify.Result) { wg.Done() }
	tg := target(uriOf(digest, ""), time.Hour)
	tg.Options = &probe.Options{Auth: probe.Credentials{Username: "alice", Password: "secret"}}
	for i := range n {
		p.Start(ctx, target(uriOf(tcp, ";transport=tcp"), time.Hour), uint64(i), done)
		p.Start(ctx, tg, uint64(i), done)
	}
	for range n {
		tcp.next(t)
	}
	<-challenged // Timer E recovers what the loopback's buffers drop
	if g := runtime.NumGoroutine(); g > before+10 {
		t.Errorf("%d goroutines with %d TCP and %d digest probes in flight, %d before", g, n, n, before)
	}
	if s := p.Stats(); s.Probes != 3*n || s.AuthRetries != n {
		t.Errorf("stats %+v, want %d transactions and %d retries", s, 3*n, n)
	}
	cancel()
	wg.Wait()
}

// TestStartInFlightIsCompact: a UDP probe in flight is a transaction
// without extension, of at most 160 bytes, whose headers it shares with
// the probes of other contacts: what a dead contact costs while its probe
// waits.
func TestStartInFlightIsCompact(t *testing.T) {
	if size := unsafe.Sizeof(transaction{}); size > 160 {
		t.Errorf("transaction is %d bytes, want at most 160", size)
	}
	r := newUDPResponder(t, func(*exchange) {})
	p := newProber(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	for _, user := range []string{"alice", "bob"} {
		uri := "sip:" + user + "@" + r.addr.String()
		p.Start(ctx, target(uri, time.Hour), 0, func(uint64, qualify.Result) { done <- struct{}{} })
	}
	p.table.mu.Lock()
	var hdrs []*headers
	p.table.each(func(tx *transaction) {
		if tx.ext != nil {
			t.Errorf("probe of %s has an extension", tx.rec.req.ruri)
		}
		hdrs = append(hdrs, tx.rec.req.hdr)
	})
	p.table.mu.Unlock()
	if len(hdrs) != 2 || hdrs[0] != hdrs[1] {
		t.Errorf("headers of the probes in flight: %v, want one shared copy", hdrs)
	}
	cancel()
	<-done
	<-done
}
