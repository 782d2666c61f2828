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

// TestResponseToASlotsFormerProbe: a slot is reused at once, and the new
// branch key keeps a response to its former transaction, a duplicate or a
// late one, from completing the new one; a branch naming a slot never
// made is late.
func TestResponseToASlotsFormerProbe(t *testing.T) {
	tb := newTable(&counters{})
	dest := netip.MustParseAddrPort("192.0.2.1:5060")
	start := func() *transaction {
		tx := tb.slab.acquire()
		tx.ext = newExt()
		tx.st.req = request{callID: rand.Uint64(), cseq: 1, hdr: &headers{transport: "UDP"}}
		tx.st.dest, tx.st.deadline = dest, tb.now().add(time.Hour)
		if !tb.register(tx, tx.st.deadline, nil) {
			t.Fatal("register")
		}
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
	answered := a.st.req
	if d := answer(answered); d != dropNone {
		t.Fatalf("first answer: %v", d)
	}
	<-a.ext.done
	end(a)
	b := start()
	if b != a || b.st.req.key == answered.key {
		t.Fatalf("slot %d key %x after slot %d key %x: want the slot again with a new key", b.idx, b.st.req.key, a.idx, answered.key)
	}
	if d := answer(answered); d != dropDuplicate || !b.active {
		t.Errorf("the former probe's answer again: %v, new probe active %v; want duplicate, true", d, b.active)
	}

	timedOut := b.st.req
	tb.fail(b, qualify.ReasonTimeout, detailNone)
	<-b.ext.done
	end(b)
	c := start()
	if d := answer(timedOut); d != dropLate || !c.active {
		t.Errorf("answer to a timed-out probe: %v, new probe active %v; want late, true", d, c.active)
	}
	if d := answer(request{key: 0x7fffffff_fffffff0, callID: 1}); d != dropLate {
		t.Errorf("branch naming a slot never made: %v, want late", d)
	}
	if d := answer(c.st.req); d != dropNone {
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
	tb := newTable(&counters{})
	const n = 200_000
	seen := make(map[uint64]bool, n)
	for range n {
		tx := tb.slab.acquire()
		tx.ext = newExt()
		tx.st.deadline = tb.now().add(time.Hour)
		if !tb.register(tx, tx.st.deadline, nil) {
			t.Fatal("register")
		}
		if seen[tx.st.req.key] {
			t.Fatalf("branch key %x again after %d registrations", tx.st.req.key, len(seen))
		}
		seen[tx.st.req.key] = true
		tb.fail(tx, qualify.ReasonTimeout, detailNone)
		<-tx.ext.done
		tx.reset()
		tb.slab.release(tx)
		tb.events = timerQueue{}
	}
	if made := tb.slab.made.Load(); made != 1 {
		t.Errorf("%d slots made, want the one reused", made)
	}
}

// TestInFlightCountsTheRegistered: each stops after inFlight registered
// transactions, so the count must follow registration, completion and
// abandonment exactly (one too few would hide a probe from a cancelled
// context or a broken connection).
func TestInFlightCountsTheRegistered(t *testing.T) {
	tb := newTable(&counters{})
	start := func() *transaction {
		tx := tb.slab.acquire()
		tx.ext = newExt()
		tx.st.deadline = tb.now().add(time.Hour)
		tb.register(tx, tx.st.deadline, nil)
		return tx
	}
	txs := make([]*transaction, 2*slotsPerChunk)
	for i := range txs {
		txs[i] = start()
	}
	for i, tx := range txs[:len(txs)-1] {
		switch i % 3 {
		case 0: // completed
			tb.fail(tx, qualify.ReasonTimeout, detailNone)
			<-tx.ext.done
		case 1: // abandoned by its prober
			tb.abandon(tx)
		case 2: // completed, then abandoned: the signal is consumed
			tb.fail(tx, qualify.ReasonTimeout, detailNone)
			tb.abandon(tx)
		}
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var seen []*transaction
	tb.each(func(tx *transaction) { seen = append(seen, tx) })
	if tb.inFlight != 1 || len(seen) != 1 || seen[0] != txs[len(txs)-1] {
		t.Errorf("in flight %d, each saw %d; want only the last transaction", tb.inFlight, len(seen))
	}
}
