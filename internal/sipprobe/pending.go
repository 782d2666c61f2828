package sipprobe

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// transaction is one outstanding OPTIONS client transaction (RFC 3261
// section 17.1.2), in a slot of the table's slab. gen and active belong to
// table.mu; st is written by the probing goroutine while the transaction
// is not registered, and its outcome fields by whoever completes it under
// table.mu, before it signals the completion. Whoever looks a transaction
// up by its key checks active before reading st.
//
// An asynchronous UDP probe (Start) is a transaction without ext:
// 160 bytes, what a probe in flight to a dead contact costs beside its
// 16-byte timer event (issue 7: a million dead contacts keep 50,000
// probes in flight; at 448 bytes each they made dead contacts cost more
// memory than live ones).
type transaction struct {
	st  txState
	ext *txExt // a blocking probe's; nil for an asynchronous one

	// An asynchronous probe has no goroutine waiting: cb receives tag and
	// its result, and w is the table's watch of its context, if that can
	// be cancelled. Set at registration, read by the completion.
	cb  func(uint64, qualify.Result)
	tag uint64
	w   *watch

	gen uint32 // bumped at every registration (stale timer events)
	idx uint32 // its slot in the slab, for good
	// refs counts the owners of an asynchronous probe, the sending
	// goroutine and the completion; the last one releases it.
	refs   atomic.Int32
	active bool // registered: its key finds it
}

// txState is the resettable part of every transaction.
type txState struct {
	req      request
	dest     netip.AddrPort // where the request went
	sent     instant        // first send of the probe (RTT start)
	deadline instant
	recv     instant // the final response
	code     int16   // of the final response
	reason   qualify.Reason
	detail   detail
	// doublings is how many times Timer E has doubled from T1 (UDP); at
	// maxDoublings its interval is T2.
	doublings uint8
}

// maxDoublings is where Timer E stops doubling: T1 << 3 == T2.
const maxDoublings = 3

// interval is the transaction's next Timer E interval: T1 doubled, at
// most T2 (RFC 3261 section 17.1.2.2).
func (st *txState) interval() time.Duration {
	return min(T1<<st.doublings, T2)
}

// txExt is what only a blocking probe (Probe, and Start over a stream
// or with credentials) needs: its buffer, its connection, the signal its
// goroutine waits on, and the digest exchange.
type txExt struct {
	buf  []byte        // the request as sent
	conn *streamConn   // nil for UDP
	done chan struct{} // capacity 1; one send per registration

	challenge string // WWW-/Proxy-Authenticate value kept for wantChallenge
	authName  string // Authorization or Proxy-Authorization of a retry, or ""
	authValue string
	proxyAuth bool // the challenge came in Proxy-Authenticate (407)
	// wantChallenge asks the receiver to keep a 401/407 challenge.
	wantChallenge bool
}

// newExt returns the extension of a blocking probe.
func newExt() *txExt { return &txExt{done: make(chan struct{}, 1)} }

// reset clears the transaction for the next probe, keeping its
// generation and slot, and detaches its extension, cleared but for its
// buffer and done channel, which it returns.
func (tx *transaction) reset() *txExt {
	e := tx.ext
	tx.st = txState{}
	tx.cb, tx.tag, tx.w, tx.ext = nil, 0, nil, nil
	if e != nil {
		*e = txExt{buf: e.buf[:0], done: e.done}
	}
	return e
}

// conn is the stream the transaction was sent on, or nil for UDP.
func (tx *transaction) conn() *streamConn {
	if tx.ext == nil {
		return nil
	}
	return tx.ext.conn
}

// appendRequest appends the transaction's request, as it was last sent.
func (tx *transaction) appendRequest(b []byte) []byte {
	if e := tx.ext; e != nil {
		return appendRequest(b, &tx.st.req, e.authName, e.authValue)
	}
	return appendRequest(b, &tx.st.req, "", "")
}

// detail says more about a failure than its reason; it is a number so
// that it costs a transaction one byte.
type detail uint8

const (
	detailNone detail = iota
	detailSendFailed
	detailCanceled
	detailClosed
	detailConnClosed
)

func (d detail) String() string {
	return [...]string{"", "send failed", "canceled", "prober closed", "connection closed"}[d]
}

// drop is why a response was not matched.
type drop uint8

const (
	dropNone drop = iota
	dropLate
	dropDuplicate
	dropWrongSource
	dropMismatch
)

// recentSize is the number of slots of the answered-key set that tells
// duplicates from late responses (512 KiB).
const (
	recentBits = 16
	recentSize = 1 << recentBits
)

// table is the pending table: outstanding transactions, found by the
// slot their branch key names, and the queue of their next timer events.
// One mutex guards both; each probe takes it a few times for a few
// hundred nanoseconds.
type table struct {
	mu     sync.Mutex
	epoch  time.Time // instant 0
	counts *counters
	slab   slab
	salt   uint32 // of newKey, drawn per table
	// inFlight counts the registered transactions, so that each stops
	// after the last one instead of walking every slot ever made.
	inFlight int
	events   timerQueue
	wake     chan struct{} // capacity 1: the queue has a new earliest event
	closed   bool
	// recent remembers answered keys to count duplicates: direct-mapped
	// by a hash of the key (its low bits are a slot), so a newer answer can
	// evict an older one and its duplicate then counts as late. A map with
	// a ring cost about 1 us per answer in deletes (issue 7).
	recent [recentSize]atomic.Uint64 // atomic: datagram answers read it without mu
	// ready holds completed asynchronous transactions until whoever
	// completed them drains the list outside mu and calls finish on each.
	// spare is the list drained last, kept for reuse: with a list made
	// anew at each drain, the timeouts of dead contacts were the
	// prober's only garbage, 23 bytes per probe (issue 7).
	ready   []*transaction
	spare   []*transaction
	finish  func(*transaction)
	watches map[context.Context]*watch
}

// newTable returns an empty table that counts into c. Counters are
// updated before a transaction completes, so a Result never runs ahead of
// Stats.
func newTable(c *counters) *table {
	return &table{
		epoch:   time.Now(),
		salt:    rand.Uint32(),
		counts:  c,
		wake:    make(chan struct{}, 1),
		watches: make(map[context.Context]*watch),
	}
}

// register draws a fresh branch key for tx, a transaction of the slab,
// and adds it with its first timer event; the context of an asynchronous
// tx is watched. It returns false when the table is closed, and
// tx.st.reason says so.
func (tb *table) register(tx *transaction, first instant, ctx context.Context) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		tx.st.reason, tx.st.detail = qualify.ReasonTransport, detailClosed
		return false
	}
	tx.gen++
	tx.st.req.key = newKey(tx.idx, tx.gen, tb.salt)
	tx.active = true
	tb.inFlight++
	if tx.cb != nil {
		tb.watch(tx, ctx)
	}
	tb.push(timerItem{due: first, idx: tx.idx, gen: tx.gen})
	return true
}

// lookup returns the registered transaction of key, or nil. tb.mu must be
// held.
func (tb *table) lookup(key uint64) *transaction {
	tx := tb.slab.at(slotOf(key))
	if tx == nil || !tx.active || tx.st.req.key != key {
		return nil
	}
	return tx
}

// each calls f with every registered transaction, which f may complete.
// tb.mu must be held.
func (tb *table) each(f func(*transaction)) {
	left := tb.inFlight
	for idx := uint32(0); left > 0 && idx < tb.slab.made.Load(); idx++ {
		if tx := tb.slab.at(idx); tx.active {
			left--
			f(tx)
		}
	}
}

// push adds an event and wakes the timer goroutine if it is the earliest.
// tb.mu must be held.
func (tb *table) push(it timerItem) {
	tb.events.push(it)
	if top := tb.events.peek(); top == it {
		select {
		case tb.wake <- struct{}{}:
		default:
		}
	}
}

// complete removes tx and wakes its prober, or, for an asynchronous
// probe, queues it for drain. tb.mu must be held and tx active.
func (tb *table) complete(tx *transaction) {
	if async := tb.take(tx); async != nil {
		tb.ready = append(tb.ready, async)
	}
}

// take removes tx and wakes its prober; an asynchronous tx is returned
// instead, for the caller to finish once it has released tb.mu. tb.mu
// must be held and tx active.
func (tb *table) take(tx *transaction) *transaction {
	tx.active = false
	tb.inFlight--
	if tx.cb != nil {
		tb.unwatch(tx)
		return tx
	}
	tx.ext.done <- struct{}{}
	return nil
}

// drain finishes the asynchronous transactions completed so far. Whoever
// completes transactions calls it after releasing tb.mu, so that results
// are delivered without the table locked.
func (tb *table) drain() {
	tb.mu.Lock()
	ready := tb.ready
	if len(ready) == 0 {
		tb.mu.Unlock()
		return
	}
	tb.ready, tb.spare = tb.spare, nil
	tb.mu.Unlock()
	for _, tx := range ready {
		tb.finish(tx)
	}
	clear(ready)
	if cap(ready) > maxSpare {
		return // a burst is over: give the memory back
	}
	tb.mu.Lock()
	if tb.spare == nil {
		tb.spare = ready[:0]
	}
	tb.mu.Unlock()
}

// maxSpare is the largest ready list kept for reuse: ten times the
// timeouts of a 20 ms timer wake-up with a million dead contacts at
// F = 60 s.
const maxSpare = 4096

// fail completes tx with reason unless it already completed.
func (tb *table) fail(tx *transaction, reason qualify.Reason, d detail) {
	tb.mu.Lock()
	if tx.active {
		tx.st.reason, tx.st.detail = reason, d
		tb.complete(tx)
	}
	tb.mu.Unlock()
	tb.drain()
}

// abandon is called by the prober when it stops waiting for tx (context
// cancelled). It reports whether tx was still outstanding; if not, its
// done signal is pending and is consumed here.
func (tb *table) abandon(tx *transaction) bool {
	tb.mu.Lock()
	active := tx.active
	if active {
		tx.active = false
		tb.inFlight--
	}
	tb.mu.Unlock()
	if !active {
		<-tx.ext.done
	}
	return active
}

// match finds the transaction m answers, checks that it came from src on
// conn, and completes it with a final response; it counts the outcome and
// returns it (why not matched, and whether m was provisional).
func (tb *table) match(m *message, src netip.AddrPort, conn *streamConn, now instant) (drop, bool) {
	d, provisional, async := tb.find(m, src, conn, now)
	tb.counts.count(d, provisional)
	if async != nil {
		tb.finish(async)
	}
	return d, provisional
}

// find does the work of match under tb.mu, and returns the asynchronous
// transaction m completed, if any, to be finished without the lock (one
// lock per answer instead of a second one to drain).
func (tb *table) find(m *message, src netip.AddrPort, conn *streamConn, now instant) (drop, bool, *transaction) {
	key, ok := branchKey(m.branch)
	if !ok {
		return dropLate, false, nil
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tx := tb.lookup(key)
	switch {
	case tx == nil:
		if tb.answered(key) {
			return dropDuplicate, false, nil
		}
		return dropLate, false, nil
	case tx.conn() != conn || (conn == nil && tx.st.dest != src):
		return dropWrongSource, false, nil
	case !tx.matches(m):
		return dropMismatch, false, nil
	case m.code < 200:
		// Provisional: the deadline stays; Timer E continues at T2
		// (Proceeding state, RFC 3261 section 17.1.2.2).
		tx.st.doublings = maxDoublings
		return dropNone, true, nil
	}
	tx.answer(m, now)
	tb.counts.matched.Add(1)
	tb.remember(key)
	return dropNone, false, tb.take(tx)
}

// matches compares the Call-ID and CSeq of m with the request's.
func (tx *transaction) matches(m *message) bool {
	return callMatches(m, tx.st.req.callID, tx.st.req.cseq)
}

// answer records the final response m.
func (tx *transaction) answer(m *message, now instant) {
	tx.st.code, tx.st.recv = int16(m.code), now
	e := tx.ext
	if e == nil || !e.wantChallenge {
		return
	}
	switch {
	case m.code == 401 && m.wwwAuth != nil:
		e.challenge = string(m.wwwAuth)
	case m.code == 407 && m.proxyAuth != nil:
		e.challenge, e.proxyAuth = string(m.proxyAuth), true
	}
}

// remember records an answered key in the recent set.
func (tb *table) remember(key uint64) {
	tb.recent[recentSlot(key)].Store(key)
}

// answered reports whether key is in the recent set.
func (tb *table) answered(key uint64) bool {
	return key != 0 && tb.recent[recentSlot(key)].Load() == key
}

// recentSlot is where key goes in the recent set: the top bits of a
// Fibonacci hash, since the key's low bits are its slot, reused at once.
func recentSlot(key uint64) uint64 {
	return key * 0x9e3779b97f4a7c15 >> (64 - recentBits)
}

// failConn fails every transaction sent on conn (the connection broke).
func (tb *table) failConn(conn *streamConn) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.each(func(tx *transaction) {
		if tx.conn() == conn {
			tx.st.reason, tx.st.detail = qualify.ReasonTransport, detailConnClosed
			tb.complete(tx)
		}
	})
}

// close fails every outstanding transaction and refuses new ones.
func (tb *table) close() {
	tb.mu.Lock()
	tb.closed = true
	tb.each(func(tx *transaction) {
		tx.st.reason, tx.st.detail = qualify.ReasonTransport, detailClosed
		tb.complete(tx)
	})
	for ctx, w := range tb.watches {
		w.stop()
		delete(tb.watches, ctx)
	}
	tb.mu.Unlock()
	tb.drain()
}
