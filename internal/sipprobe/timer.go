package sipprobe

import (
	"net/netip"
	"time"
)

// timerItem is one due event of a transaction: a Timer E retransmission or
// its deadline. Items are never removed early; an item whose gen differs
// from its transaction's, or whose transaction is no longer active, is
// stale and skipped when it comes due.
type timerItem struct {
	due instant
	idx uint32 // the transaction's slot
	gen uint32
}

// instant is a moment on the monotonic clock, in nanoseconds since the
// epoch of the table: 8 bytes where a time.Time takes 24, in every
// transaction and timer event.
type instant int64

// add returns i + d.
func (i instant) add(d time.Duration) instant { return i + instant(d) }

// now is the current instant of the table's clock.
func (tb *table) now() instant { return instant(time.Since(tb.epoch)) }

// time converts i to a time.Time, with its monotonic reading.
func (tb *table) time(i instant) time.Time { return tb.epoch.Add(time.Duration(i)) }

// timerQueue orders timer events by due time: a FIFO for events pushed in
// due order, and a binary heap for the rest. Nearly every probe pushes
// one event at its send time plus T1 (or its timeout), in the order the
// probes are sent, so the FIFO takes them in O(1) and their heads come
// out in O(1) too; retransmissions, deadlines after a retransmission and
// probes with mixed timeouts go to the heap, which costs O(log n) a push
// and a pop.
type timerQueue struct {
	fifo []timerItem // due times never decrease
	head int         // fifo[head:] are queued
	heap timerHeap
}

// len returns the number of queued events.
func (q *timerQueue) len() int { return len(q.fifo) - q.head + len(q.heap.items) }

// push queues it.
func (q *timerQueue) push(it timerItem) {
	if n := len(q.fifo); n == q.head || it.due >= q.fifo[n-1].due {
		if q.head > 0 && q.head == n {
			q.fifo, q.head = q.fifo[:0], 0
		}
		q.fifo = append(q.fifo, it)
		return
	}
	q.heap.push(it)
}

// fromFIFO reports whether the earliest event is the FIFO's head; the
// queue must not be empty.
func (q *timerQueue) fromFIFO() bool {
	if q.head == len(q.fifo) {
		return false
	}
	return len(q.heap.items) == 0 || q.heap.items[0].due >= q.fifo[q.head].due
}

// peek returns the earliest event; the queue must not be empty.
func (q *timerQueue) peek() timerItem {
	if q.fromFIFO() {
		return q.fifo[q.head]
	}
	return q.heap.items[0]
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *timerQueue) pop() timerItem {
	if !q.fromFIFO() {
		return q.heap.pop()
	}
	it := q.fifo[q.head]
	q.fifo[q.head] = timerItem{}
	q.head++
	if q.head == len(q.fifo) {
		q.fifo, q.head = q.fifo[:0], 0
	} else if q.head >= 1024 && q.head*2 >= len(q.fifo) {
		// Slide the queued half down so the slice does not grow forever.
		n := copy(q.fifo, q.fifo[q.head:])
		clear(q.fifo[n:])
		q.fifo, q.head = q.fifo[:n], 0
	}
	return it
}

// timerHeap is a binary min-heap of timerItem by due time, without the
// interface boxing of container/heap.
type timerHeap struct{ items []timerItem }

func (h *timerHeap) push(it timerItem) {
	h.items = append(h.items, it)
	i := len(h.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h.items[i].due >= h.items[parent].due {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *timerHeap) pop() timerItem {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = timerItem{}
	h.items = h.items[:last]
	h.down(0)
	return top
}

func (h *timerHeap) down(i int) {
	n := len(h.items)
	for {
		small, l, r := i, 2*i+1, 2*i+2
		if l < n && h.items[l].due < h.items[small].due {
			small = l
		}
		if r < n && h.items[r].due < h.items[small].due {
			small = r
		}
		if small == i {
			return
		}
		h.items[i], h.items[small] = h.items[small], h.items[i]
		i = small
	}
}

// timerSlack is the shortest sleep of the timer goroutine. Every probe
// leaves a Timer E event behind, stale once answered; without a floor the
// goroutine would wake once per probe to skip them. Events
// handled late still act at their own due time (see event): a
// retransmission leaves at most timerSlack late, and a timeout is reported
// at most timerSlack after its deadline. It matches the engine's default
// coalescing (engine.DefaultCoalesce), for the same reason.
const timerSlack = 20 * time.Millisecond

// maxArena bounds the retransmission buffer, which is kept between
// wake-ups so that it is not regrown at each burst. A million dead
// contacts at F = 60 s resend about 33,000 requests a second, 300 KiB per
// 20 ms wake-up; after a late wake-up (the engine's lock held by a
// reload) thousands more are due at once. fire sends them in batches of
// at most this many bytes instead of growing the buffer to hold them all,
// so a backlog costs batches, not memory.
const maxArena = 1 << 20

// maxRequest is the room a batch keeps for one more request: a UDP
// datagram cannot be larger.
const maxRequest = 64 << 10

// resend is one retransmission taken out of the lock: the request bytes
// are copied so the transaction may complete and be reused meanwhile.
type resend struct {
	off, n int
	dest   netip.AddrPort
}

// timers runs the due events of a table: one goroutine and one time.Timer
// for every transaction in flight (STYLE.md habit 4).
type timers struct {
	tb      *table
	send    func(b []byte, dest netip.AddrPort) // UDP retransmission
	counts  *counters
	arena   []byte
	resends []resend
	// redial starts a redial of this batch, outside the lock (see
	// machine's midpoint); redials are the batch's.
	redial  func(redial)
	redials []redial
}

// run fires due events until stop is closed.
func (ts *timers) run(stop <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-ts.tb.wake:
		}
		next := ts.fire(ts.tb.now())
		t.Reset(max(next, timerSlack))
	}
}

// fire handles every event due at now, sending the retransmissions
// outside the lock in batches of at most maxArena bytes, and returns the
// wait until the next event.
func (ts *timers) fire(now instant) time.Duration {
	for {
		next, more := ts.batch(now)
		if !more {
			return next
		}
	}
}

// batch handles due events until none is left or the arena is full, sends
// the retransmissions, and reports the wait until the next event and
// whether due events remain.
func (ts *timers) batch(now instant) (time.Duration, bool) {
	ts.arena, ts.resends = ts.arena[:0], ts.resends[:0]
	ts.tb.mu.Lock()
	for ts.tb.events.len() > 0 && ts.tb.events.peek().due <= now && len(ts.arena) <= maxArena-maxRequest {
		ts.event(ts.tb.events.pop())
	}
	next, more := time.Hour, false
	if ts.tb.events.len() > 0 {
		next = time.Duration(ts.tb.events.peek().due - now)
		more = next <= 0
	}
	ts.tb.mu.Unlock()
	for i, r := range ts.redials {
		ts.redial(r)
		ts.redials[i] = redial{}
	}
	ts.redials = ts.redials[:0]
	ts.tb.drain()
	for _, r := range ts.resends {
		ts.send(ts.arena[r.off:r.off+r.n], r.dest)
	}
	if cap(ts.arena) > maxArena {
		ts.arena = nil // a request longer than maxRequest grew it
	}
	return next, more
}

// room makes room in the arena for one more request, growing it by
// doubling up to maxArena (batch leaves room for a request below that).
func (ts *timers) room() {
	if cap(ts.arena)-len(ts.arena) >= maxRequest {
		return
	}
	b := make([]byte, len(ts.arena), min(maxArena, max(2*cap(ts.arena), len(ts.arena)+maxRequest)))
	copy(b, ts.arena)
	ts.arena = b
}

// event feeds one due item to its transaction's machine; ts.tb.mu is
// held. The machine is given the item's due time, not the (possibly
// late) wake-up time, so the Timer E schedule is exact.
func (ts *timers) event(it timerItem) {
	tx := ts.tb.slab.at(it.idx)
	if !tx.active || tx.gen != it.gen {
		return
	}
	a := tx.fsm.fire(it.due)
	if tx.fsm.phase == phaseTerminated { // the deadline: the table keeps no Completed transaction
		ts.counts.timeouts.Add(1) // before the completion, as every count
		ts.tb.retireSilent(tx)    // before the result is handed out: the next probe must not take them
		ts.tb.complete(tx)
		return
	}
	if a.redial {
		ts.hedge(tx, it.gen)
	}
	if a.send {
		ts.counts.retransmissions.Add(1)
		ts.room()
		off := len(ts.arena)
		ts.arena = tx.appendRequest(ts.arena) // the bytes of the last send
		ts.resends = append(ts.resends, resend{off: off, n: len(ts.arena) - off, dest: tx.rec.dest})
	}
	if a.next != noTimer {
		ts.tb.events.push(timerItem{due: a.next, idx: it.idx, gen: it.gen})
	}
}
