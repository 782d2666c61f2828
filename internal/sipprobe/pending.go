package sipprobe

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// transaction is one probe's client transaction in a slot of the
// table's slab: its request, where it went, its machine, and how its
// result is delivered. gen and active belong to table.mu; rec and fsm
// are written by the goroutine that starts the transaction while it is
// not registered, and under table.mu while it is. Whoever looks a
// transaction up by its key checks active before reading them.
//
// A UDP probe to an IP address is a transaction without ext: 160 bytes,
// what a probe in flight to a dead contact costs beside its 16-byte timer
// event (a million dead contacts at F = 60 s keep 50,000 probes in
// flight).
type transaction struct {
	rec txRecord
	fsm machine
	ext *txExt // TCP/TLS and digest probes only

	// cb receives tag and the probe's result, and w is the table's watch
	// of its context, if that can be cancelled. Set before or at
	// registration, read by the completion.
	cb  func(uint64, qualify.Result)
	tag uint64
	w   *watch

	gen uint32 // bumped at every registration (stale timer events)
	idx uint32 // its slot in the slab, for good
	// refs counts the owners of a registered transaction, the goroutine
	// sending it and its completion; the last one releases it, or starts
	// its digest retry (see Prober.unref).
	refs   atomic.Int32
	active bool // registered: its key finds it
	// retryAfter is the final response's Retry-After in seconds when it
	// is a 503 with one, else 0 (qualify-semantics §11.4); in what the
	// fields above leave of the struct's last word.
	retryAfter uint16
}

// txRecord is the request of a transaction and its timing.
type txRecord struct {
	req  request
	dest netip.AddrPort // where the request went
	sent instant        // first send of the probe (RTT start)
	recv instant        // the final response
}

// txExt is what only a probe over TCP/TLS or with credentials needs: its
// connection and the digest exchange.
type txExt struct {
	conn *streamConn // nil for UDP
	// prev is the connection the request went on before a redial, whose
	// answer still counts; reused: the probe did not dial conn. prev is
	// written under table.mu while the transaction is registered.
	prev   *streamConn
	reused bool
	auth   probe.Credentials

	challenge string // WWW-/Proxy-Authenticate value kept for wantChallenge
	authName  string // Authorization or Proxy-Authorization of a retry, or ""
	authValue string
	proxyAuth bool // the challenge came in Proxy-Authenticate (407)
	// wantChallenge asks the receiver to keep a 401/407 challenge.
	wantChallenge bool
	// retry asks the last owner of the completed transaction to answer
	// its challenge.
	retry bool
}

// reset clears the transaction for the next probe, keeping its
// generation and slot, and detaches its extension, cleared, which it
// returns.
func (tx *transaction) reset() *txExt {
	e := tx.ext
	tx.rec, tx.fsm = txRecord{}, machine{}
	tx.cb, tx.tag, tx.w, tx.ext = nil, 0, nil, nil
	if e != nil {
		*e = txExt{}
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

// sentOn reports whether the request went on conn: its connection, the
// one before a redial, or UDP (nil) for a UDP transaction.
func (tx *transaction) sentOn(conn *streamConn) bool {
	return tx.conn() == conn || (conn != nil && tx.ext != nil && tx.ext.prev == conn)
}

// transport is the transport the transaction was sent over.
func (tx *transaction) transport() transport {
	if c := tx.conn(); c != nil {
		return c.transport
	}
	return udp
}

// appendRequest appends the transaction's request, as it was last sent.
func (tx *transaction) appendRequest(b []byte) []byte {
	if e := tx.ext; e != nil {
		return appendRequest(b, &tx.rec.req, e.authName, e.authValue)
	}
	return appendRequest(b, &tx.rec.req, "", "")
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

// table is the pending table: every probe's transactions, found by the
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
	// a ring cost about 1 us per answer in deletes.
	recent [recentSize]uint64
	// ready holds completed transactions until whoever completed them
	// drains the list outside mu and calls finish on each. spare is the
	// list drained last, kept for reuse, so that the timeouts of dead
	// contacts make no garbage.
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

// register draws a fresh branch key for tx, a started transaction of the
// slab, adds it with its timer armed for next, and watches ctx. It
// returns false when the table is closed, and tx's machine says so.
func (tb *table) register(tx *transaction, next instant, ctx context.Context) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		tx.fsm.end(qualify.ReasonTransport, detailClosed)
		return false
	}
	tx.gen++
	tx.rec.req.key = newKey(tx.idx, tx.gen, tb.salt)
	tx.active = true
	tb.inFlight++
	if c := tx.conn(); c != nil {
		c.inflight++
	}
	tb.watch(tx, ctx)
	tb.push(timerItem{due: next, idx: tx.idx, gen: tx.gen})
	return true
}

// lookup returns the registered transaction of key, or nil. tb.mu must be
// held.
func (tb *table) lookup(key uint64) *transaction {
	tx := tb.slab.at(slotOf(key))
	if tx == nil || !tx.active || tx.rec.req.key != key {
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

// complete removes tx and queues it for drain. tb.mu must be held and tx
// active.
func (tb *table) complete(tx *transaction) {
	tb.take(tx)
	tb.ready = append(tb.ready, tx)
}

// take removes tx, for the caller to finish once it has released tb.mu,
// and lets go of the connections it was sent on. tb.mu must be held and
// tx active.
func (tb *table) take(tx *transaction) {
	tx.active = false
	tb.inFlight--
	tb.unwatch(tx)
	if e := tx.ext; e != nil && e.conn != nil {
		e.conn.release()
		if e.prev != nil {
			e.prev.release()
			e.prev = nil
		}
	}
}

// drain finishes the transactions completed so far. Whoever completes
// transactions calls it after releasing tb.mu, so that results are
// delivered without the table locked.
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

// fail ends tx with reason unless it already completed.
func (tb *table) fail(tx *transaction, reason qualify.Reason, d detail) {
	tb.mu.Lock()
	if tx.active {
		tx.fsm.end(reason, d)
		tb.complete(tx)
	}
	tb.mu.Unlock()
	tb.drain()
}

// match finds the transaction m answers, checks that it came from src on
// conn, and feeds m to its machine; it counts the outcome and returns it
// (why not matched, and whether m was provisional).
func (tb *table) match(m *message, src netip.AddrPort, conn *streamConn, now instant) (drop, bool) {
	d, provisional, done := tb.find(m, src, conn, now)
	tb.counts.count(d, provisional)
	if done != nil {
		tb.finish(done)
	}
	return d, provisional
}

// find does the work of match under tb.mu, and returns the transaction m
// completed, if any, to be finished without the lock (one lock per
// answer instead of a second one to drain).
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
	case !tx.sentOn(conn) || (conn == nil && tx.rec.dest != src):
		return dropWrongSource, false, nil
	case !tx.matches(m):
		return dropMismatch, false, nil
	}
	// A provisional response leaves the timer armed (Proceeding). At the
	// final one the transaction leaves the table: the answered-key set
	// absorbs the retransmissions Timer K would (see machine).
	if final, _ := tx.fsm.receive(m.code, now); !final {
		return dropNone, true, nil
	}
	tx.answer(m, now)
	tb.counts.matched.Add(1)
	tb.remember(key)
	tb.take(tx)
	return dropNone, false, tx
}

// matches compares the Call-ID and CSeq of m with the request's.
func (tx *transaction) matches(m *message) bool {
	return callMatches(m, tx.rec.req.callID, tx.rec.req.cseq)
}

// callMatches reports whether m has the Call-ID and CSeq of an OPTIONS
// request.
func callMatches(m *message, callID uint64, cseq uint32) bool {
	var id [16]byte
	return m.cseq == cseq && string(m.cseqMethod) == "OPTIONS" && bytes.Equal(m.callID, appendHex(id[:0], callID))
}

// answer records when the final response m came, a 503's Retry-After,
// and its challenge if the probe wants one.
func (tx *transaction) answer(m *message, now instant) {
	tx.rec.recv = now
	tx.retryAfter = 0
	if m.code == 503 {
		tx.retryAfter = m.retryAfter
	}
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

// remember records an answered key in the recent set. tb.mu must be held.
func (tb *table) remember(key uint64) {
	tb.recent[recentSlot(key)] = key
}

// answered reports whether key is in the recent set. tb.mu must be held.
func (tb *table) answered(key uint64) bool {
	return key != 0 && tb.recent[recentSlot(key)] == key
}

// recentSlot is where key goes in the recent set: the top bits of a
// Fibonacci hash, since the key's low bits are its slot, reused at once.
func recentSlot(key uint64) uint64 {
	return key * 0x9e3779b97f4a7c15 >> (64 - recentBits)
}

// failConn fails every transaction sent on conn (the connection broke).
func (tb *table) failConn(conn *streamConn) {
	tb.mu.Lock()
	tb.each(func(tx *transaction) {
		if tx.conn() == conn {
			tx.fsm.end(qualify.ReasonTransport, detailConnClosed)
			tb.complete(tx)
		}
	})
	tb.mu.Unlock()
	tb.drain()
}

// close fails every outstanding transaction and refuses new ones.
func (tb *table) close() {
	tb.mu.Lock()
	tb.closed = true
	tb.each(func(tx *transaction) {
		tx.fsm.end(qualify.ReasonTransport, detailClosed)
		tb.complete(tx)
	})
	for ctx, w := range tb.watches {
		w.stop()
		delete(tb.watches, ctx)
	}
	tb.mu.Unlock()
	tb.drain()
}
