package sipprobe

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// timerRig runs a table and its timer goroutine in a synctest bubble, with
// a send that records when each retransmission happened.
type timerRig struct {
	tb    *table
	ts    *timers
	done  chan *transaction // completed transactions
	stop  chan struct{}
	mu    sync.Mutex
	sends []time.Duration
	start time.Time
	// onSend, if set, runs after each recorded retransmission.
	onSend func()
}

func newTimerRig(t *testing.T) *timerRig {
	r := &timerRig{stop: make(chan struct{}), start: time.Now()}
	r.tb, r.done = newTestTable(16)
	r.ts = &timers{tb: r.tb, counts: &counters{}, send: func([]byte, netip.AddrPort) {
		r.mu.Lock()
		r.sends = append(r.sends, time.Since(r.start))
		r.mu.Unlock()
		if r.onSend != nil {
			r.onSend()
		}
	}}
	go r.ts.run(r.stop)
	t.Cleanup(func() { close(r.stop) })
	return r
}

// startTx registers a UDP (conn == nil) or stream transaction now.
func (r *timerRig) startTx(t *testing.T, timeout time.Duration, conn *streamConn) *transaction {
	tx := r.tb.slab.acquire()
	tx.rec.req = request{cseq: 1, callID: rand.Uint64(), hdr: &headers{transport: "UDP"}}
	if conn != nil {
		tx.ext = &txExt{conn: conn}
	}
	registerTx(t, r.tb, tx, timeout, nil)
	return tx
}

// respond feeds tx a response with code, as the receive goroutine would.
func (r *timerRig) respond(t *testing.T, tx *transaction, code int) {
	m := message{code: code, cseq: 1, cseqMethod: []byte("OPTIONS"),
		branch: appendHex([]byte(branchPrefix), tx.rec.req.key), callID: appendHex(nil, tx.rec.req.callID)}
	if d, _ := r.tb.match(&m, tx.rec.dest, tx.conn(), r.tb.now()); d != dropNone {
		t.Errorf("%d not matched: %v", code, d)
	}
}

func seconds(ss ...float64) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		out = append(out, time.Duration(s*float64(time.Second)))
	}
	return out
}

// TestTimerE: UDP retransmissions at T1 doubling to T2 (RFC 3261 section
// 17.1.2.2; docs/qualify-semantics.md §3.2) until the deadline, which
// ends the transaction exactly.
func TestTimerE(t *testing.T) {
	cases := []struct {
		timeout time.Duration
		want    []time.Duration
	}{
		{32 * time.Second, seconds(0.5, 1.5, 3.5, 7.5, 11.5, 15.5, 19.5, 23.5, 27.5, 31.5)},
		{3 * time.Second, seconds(0.5, 1.5)},
		{500 * time.Millisecond, nil},
	}
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			r := newTimerRig(t)
			tx := r.startTx(t, tc.timeout, nil)
			<-r.done
			if got := time.Since(r.start); got != tc.timeout {
				t.Errorf("timed out after %v, want %v", got, tc.timeout)
			}
			if tx.fsm.reason != qualify.ReasonTimeout || !slices.Equal(r.sends, tc.want) {
				t.Errorf("reason %v, sends %v, want timeout with %v", tx.fsm.reason, r.sends, tc.want)
			}
		})
	}
}

// TestTimerStreamAndCompletion: a stream transaction is never
// retransmitted, and a completed transaction's stale events do nothing.
func TestTimerStreamAndCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTimerRig(t)
		ready := make(chan *transaction, 1)
		r.onSend = func() { r.respond(t, <-ready, 200) } // right after the first retransmission
		stream := r.startTx(t, 2*time.Second, &streamConn{})
		answered := r.startTx(t, 10*time.Second, nil)
		ready <- answered
		if got := <-r.done; got != answered || got.fsm.code != 200 {
			t.Errorf("first completed: code %d, want the answered one", got.fsm.code)
		}
		if got := <-r.done; got != stream {
			t.Error("second completed: not the stream")
		}
		synctest.Wait()
		if stream.fsm.reason != qualify.ReasonTimeout || time.Since(r.start) != 2*time.Second {
			t.Errorf("stream: reason %v at %v", stream.fsm.reason, time.Since(r.start))
		}
		if want := seconds(0.5); !slices.Equal(r.sends, want) {
			t.Errorf("sends %v, want %v", r.sends, want)
		}
	})
}

// TestTimerEProceeding: after a provisional response Timer E continues at
// T2 (RFC 3261 section 17.1.2.2; docs/qualify-semantics.md §3.2), and
// the deadline does not move.
func TestTimerEProceeding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTimerRig(t)
		ready := make(chan *transaction, 1)
		var once sync.Once
		r.onSend = func() { once.Do(func() { r.respond(t, <-ready, 180) }) } // right after the first retransmission
		tx := r.startTx(t, 10*time.Second, nil)
		ready <- tx
		<-r.done
		if want := seconds(0.5, 1.5, 5.5, 9.5); !slices.Equal(r.sends, want) || time.Since(r.start) != 10*time.Second {
			t.Errorf("sends %v, ended at %v; want %v, 10s", r.sends, time.Since(r.start), want)
		}
	})
}

// TestTimerQueueOrder checks the FIFO-plus-heap queue against a sorted
// list: runs of increasing due times (the FIFO's case) mixed with earlier
// ones (the heap's), popped in between, always come out earliest first,
// and the FIFO's storage is reused rather than grown.
func TestTimerQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q timerQueue
	var ref []instant
	clock := instant(0)
	for step := range 30_000 {
		switch r := rng.IntN(10); {
		case r < 5: // a probe sent now: due after T1, in send order
			clock = clock.add(time.Duration(rng.IntN(100)) * time.Microsecond)
			due := clock.add(T1)
			q.push(timerItem{due: due, gen: uint32(step)})
			ref = insertSorted(ref, due)
		case r < 6: // a retransmission or a shorter timeout: anywhere
			due := clock.add(time.Duration(rng.IntN(4000)) * time.Millisecond)
			q.push(timerItem{due: due, gen: uint32(step)})
			ref = insertSorted(ref, due)
		default:
			if len(ref) == 0 {
				continue
			}
			got := q.pop()
			if got.due != ref[0] {
				t.Fatalf("step %d: popped %v, want %v", step, got.due, ref[0])
			}
			ref = ref[1:]
		}
		if q.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(ref))
		}
	}
	if cap(q.fifo) > 4*(len(ref)+1024) {
		t.Errorf("FIFO capacity %d for %d queued events: not reused", cap(q.fifo), len(ref))
	}
}

// insertSorted inserts t into the sorted list ts.
func insertSorted(ts []instant, t instant) []instant {
	i, _ := slices.BinarySearch(ts, t)
	return slices.Insert(ts, i, t)
}

// TestDrainReusesTheReadyList checks that completing and draining
// transactions allocates nothing once the list has grown: the timeouts
// of dead contacts would otherwise be the prober's only garbage.
func TestDrainReusesTheReadyList(t *testing.T) {
	tb := newTable(&counters{})
	finished := 0
	tb.finish = func(*transaction) { finished++ }
	txs := make([]*transaction, 100)
	for i := range txs {
		txs[i] = &transaction{}
	}
	round := func() {
		tb.mu.Lock()
		tb.ready = append(tb.ready, txs...)
		tb.mu.Unlock()
		tb.drain()
	}
	round()
	round() // both lists have grown
	if allocs := testing.AllocsPerRun(10, round); allocs != 0 {
		t.Errorf("a drain allocated %v times, want 0", allocs)
	}
	if finished != 100*(2+11) {
		t.Errorf("finished %d transactions, want %d", finished, 100*13)
	}
}

// TestFireSendsABacklogInBatches checks that a backlog of retransmissions
// larger than the arena, as a late wake-up finds, is sent whole without
// growing the arena past maxArena.
func TestFireSendsABacklogInBatches(t *testing.T) {
	tb := newTable(&counters{})
	sent, most := 0, 0
	ts := &timers{tb: tb, counts: &counters{}}
	ts.send = func([]byte, netip.AddrPort) { sent, most = sent+1, max(most, cap(ts.arena)) }
	start := tb.now()
	uri := "sip:" + strings.Repeat("x", 400) + "@192.0.2.1" // requests of about 700 bytes
	n := 2 * maxArena / 500
	for range n {
		tx := tb.slab.acquire()
		tx.rec.req = request{ruri: uri, hdr: &headers{transport: "UDP"}, cseq: 1}
		tx.rec.sent = start
		tb.register(tx, tx.fsm.start(start, start.add(time.Hour), false, false).next, nil)
	}
	ts.fire(start.add(T1))
	if sent != n {
		t.Errorf("sent %d retransmissions, want %d", sent, n)
	}
	if most > maxArena {
		t.Errorf("arena grew to %d bytes, want at most %d", most, maxArena)
	}
}
