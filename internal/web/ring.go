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
	wake   chan struct{}
	closed bool
}

func newRing(size int) *ring {
	return &ring{buf: make([]frame, size), wake: make(chan struct{})}
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

// bounds returns the oldest and newest sequence numbers kept, (0, 0) when
// empty.
func (r *ring) bounds() (first, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, 0
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
