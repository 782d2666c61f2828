package web

import "sync"

// frame is one encoded SSE event, immutable once built.
type frame struct {
	seq  uint64 // engine.Event.Seq
	data []byte // "id: ...\nevent: ...\ndata: ...\n\n"
}

// ring keeps the last events for replay and wakes the streams when one is
// added. Readers copy what they need under mu and write outside it.
type ring struct {
	mu     sync.Mutex
	buf    []frame // circular, len(buf) is the capacity
	start  int     // index of the oldest frame
	n      int     // frames held
	last   uint64  // newest sequence number pushed, or the ring's base
	wake   chan struct{}
	closed bool
}

// newRing returns a ring of size frames whose first frame will follow
// base, the engine's number of the last event before the subscription.
func newRing(size int, base uint64) *ring {
	return &ring{buf: make([]frame, size), wake: make(chan struct{}), last: base}
}

// push adds f, evicting the oldest frame when full, and wakes the readers.
func (r *ring) push(f frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.n == len(r.buf) {
		r.start = (r.start + 1) % len(r.buf)
		r.n--
	}
	r.buf[(r.start+r.n)%len(r.buf)] = f
	r.n++
	r.last = max(r.last, f.seq)
	close(r.wake)
	r.wake = make(chan struct{})
}

// close ends the stream: readers drain what is kept and return.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.wake)
	}
}

// bounds returns the oldest and newest sequence numbers kept; when none
// is, the next and the last pushed (or the base), so that a client that
// has seen every event before the ring's first resumes without a gap.
func (r *ring) bounds() (first, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return r.last + 1, r.last
	}
	return r.at(0).seq, r.at(r.n - 1).seq
}

func (r *ring) at(i int) *frame { return &r.buf[(r.start+i)%len(r.buf)] }

// since returns the frames newer than cursor, in order, the channel that is
// closed on the next push, and whether the ring is closed.
func (r *ring) since(cursor uint64) (fs []frame, wake <-chan struct{}, closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.n
	for i > 0 && r.at(i-1).seq > cursor {
		i--
	}
	fs = make([]frame, 0, r.n-i)
	for ; i < r.n; i++ {
		fs = append(fs, *r.at(i))
	}
	return fs, r.wake, r.closed
}
