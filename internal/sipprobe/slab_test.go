package sipprobe

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// newTestTable returns a table whose completed transactions go to the
// returned channel, which holds n of them.
func newTestTable(n int) (*table, chan *transaction) {
	tb := newTable(&counters{})
	done := make(chan *transaction, n)
	tb.finish = func(tx *transaction) { done <- tx }
	return tb, done
}

// registerTx starts the machine of tx now with a deadline timeout later
// and registers it under ctx.
func registerTx(t testing.TB, tb *table, tx *transaction, timeout time.Duration, ctx context.Context) {
	t.Helper()
	now := tb.now()
	tx.rec.sent = now
	a := tx.fsm.start(now, now.add(timeout), tx.conn() != nil, false)
	if !tb.register(tx, a.next, ctx) {
		t.Fatal("register")
	}
}

// TestResponseToASlotsFormerProbe: a slot is reused at once, and the new
// branch key keeps a response to its former transaction, a duplicate or a
// late one, from completing the new one; a branch naming a slot never
// made is late.
func TestResponseToASlotsFormerProbe(t *testing.T) {
	tb, done := newTestTable(1)
	dest := netip.MustParseAddrPort("192.0.2.1:5060")
	start := func() *transaction {
		tx := tb.slab.acquire()
		tx.rec.req = request{callID: rand.Uint64(), cseq: 1, hdr: &headers{transport: "UDP"}}
		tx.rec.dest = dest
		registerTx(t, tb, tx, time.Hour, nil)
		return tx
	}
	answer := func(r request) drop {
		m := message{code: 200, cseq: 1, cseqMethod: []byte("OPTIONS"),
			branch: appendHex([]byte(branchPrefix), r.key), callID: appendHex(nil, r.callID)}
		d, _ := tb.match(&m, dest, nil, tb.now())
		return d
	}
	end := func(tx *transaction) {
		tx.reset()
		tb.slab.release(tx)
	}

	a := start()
	answered := a.rec.req
	if d := answer(answered); d != dropNone {
		t.Fatalf("first answer: %v", d)
	}
	<-done
	end(a)
	b := start()
	if b != a || b.rec.req.key == answered.key {
		t.Fatalf("slot %d key %x after slot %d key %x: want the slot again with a new key", b.idx, b.rec.req.key, a.idx, answered.key)
	}
	if d := answer(answered); d != dropDuplicate || !b.active {
		t.Errorf("the former probe's answer again: %v, new probe active %v; want duplicate, true", d, b.active)
	}

	timedOut := b.rec.req
	tb.fail(b, qualify.ReasonTimeout, detailNone)
	<-done
	end(b)
	c := start()
	if d := answer(timedOut); d != dropLate || !c.active {
		t.Errorf("answer to a timed-out probe: %v, new probe active %v; want late, true", d, c.active)
	}
	if d := answer(request{key: 0x7fffffff_fffffff0, callID: 1}); d != dropLate {
		t.Errorf("branch naming a slot never made: %v, want late", d)
	}
	if d := answer(c.rec.req); d != dropNone {
		t.Errorf("answer to the slot's own probe: %v", d)
	}
}

// TestSlabHoldsThePeakInFlight: slots are reused, so the slab holds as
// many transactions as were ever in flight at once, not one per probe.
func TestSlabHoldsThePeakInFlight(t *testing.T) {
	r := newUDPResponder(t, func(x *exchange) { x.reply(200) })
	p := newProber(t, Config{})
	const n = 300
	for round := range 3 {
		var wg sync.WaitGroup
		wg.Add(n)
		for i := range n {
			p.Start(context.Background(), target(uriOf(r, ""), 5*time.Second), uint64(i), func(_ uint64, res qualify.Result) {
				if res.Code != 200 {
					t.Errorf("round %d: %+v", round, res)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
	if made := p.table.slab.made.Load(); made > n {
		t.Errorf("%d transactions made for %d probes, at most %d in flight", made, 3*n, n)
	}
}

// TestBranchesOfASlotDoNotRepeat: the busiest slot is registered again
// and again, and each registration has a branch of its own (with 31
// random bits, 200,000 of them repeated about nine).
func TestBranchesOfASlotDoNotRepeat(t *testing.T) {
	tb, done := newTestTable(1)
	const n = 200_000
	seen := make(map[uint64]bool, n)
	for range n {
		tx := tb.slab.acquire()
		registerTx(t, tb, tx, time.Hour, nil)
		if seen[tx.rec.req.key] {
			t.Fatalf("branch key %x again after %d registrations", tx.rec.req.key, len(seen))
		}
		seen[tx.rec.req.key] = true
		tb.fail(tx, qualify.ReasonTimeout, detailNone)
		<-done
		tx.reset()
		tb.slab.release(tx)
		tb.events = timerQueue{}
	}
	if made := tb.slab.made.Load(); made != 1 {
		t.Errorf("%d slots made, want the one reused", made)
	}
}

// TestInFlightCountsTheRegistered: each stops after inFlight registered
// transactions, so the count must follow registration and every kind of
// completion exactly (one too few would hide a probe from a cancelled
// context or a broken connection).
func TestInFlightCountsTheRegistered(t *testing.T) {
	tb, done := newTestTable(2 * slotsPerChunk)
	conn := &streamConn{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	txs := make([]*transaction, 2*slotsPerChunk)
	start := func(i int) *transaction {
		tx := tb.slab.acquire()
		txCtx := context.Background()
		switch {
		case i == len(txs)-1: // stays in flight
		case i%3 == 1:
			tx.ext = &txExt{conn: conn}
		case i%3 == 2:
			txCtx = ctx
		}
		registerTx(t, tb, tx, time.Hour, txCtx)
		return tx
	}
	for i := range txs {
		txs[i] = start(i)
	}
	for i, tx := range txs[:len(txs)-1] {
		if i%3 == 0 {
			tb.fail(tx, qualify.ReasonTimeout, detailNone) // completed
		}
	}
	tb.failConn(conn) // the broken connection's
	tb.cancel(ctx)    // the cancelled context's
	tb.mu.Lock()
	var seen []*transaction
	tb.each(func(tx *transaction) { seen = append(seen, tx) })
	inFlight := tb.inFlight
	tb.mu.Unlock()
	if want := len(txs) - 1; len(done) != want || inFlight != 1 || len(seen) != 1 || seen[0] != txs[want] {
		t.Errorf("%d completed, in flight %d, each saw %d; want %d and only the last transaction", len(done), inFlight, len(seen), want)
	}
}
