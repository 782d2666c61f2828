package daemon

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// logWriter is the log's way out: a bounded buffer that callers append
// whole lines to without waiting, and one goroutine that writes it to w.
// A line that does not fit is dropped and counted, so a reader that
// stalls (a pipe nobody reads, a stalled journald) costs lines, never a
// caller's time: the engine's followers, a reload, the HTTP handlers and
// the shutdown log through it. Safe for concurrent use.
type logWriter struct {
	w     io.Writer
	limit int // bytes buffered at most

	mu      sync.Mutex
	buf     []byte // lines not taken by the writer yet; guarded by mu
	stopped bool   // close was called: lines are dropped; guarded by mu

	dropped atomic.Uint64 // lines dropped since the start
	// notice, if set, appends to dst the line saying that n lines were
	// dropped; the writer adds it to its next write after a drop, beyond
	// the limit, so that the notice itself is never dropped.
	notice   func(dst []byte, n uint64) []byte
	reported uint64 // dropped at the last notice; the writer's own
	// told is dropped as of the last notice that w took whole: the
	// drops after it never reached w (see unreported).
	told atomic.Uint64

	wake  chan struct{}      // a line is waiting (capacity 1)
	flush chan chan struct{} // closed once what was added before it is written
	stop  chan struct{}      // closed by close
	done  chan struct{}      // closed when the writer goroutine ends
}

// defaultLogBuffer is how many bytes of lines the log holds for a slow
// reader before it drops lines: about 8,000 contact lines.
const defaultLogBuffer = 1 << 20

// newLogWriter starts the writer goroutine of a buffer of limit bytes
// to w; close stops it.
func newLogWriter(w io.Writer, limit int) *logWriter {
	lw := &logWriter{w: w, limit: limit, wake: make(chan struct{}, 1),
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go lw.run()
	return lw
}

// add appends one line, formatted by f onto the buffer, unless it does
// not fit; then, or after close, the line is dropped and counted. It
// never waits for the writer.
func (lw *logWriter) add(f func(dst []byte) []byte) {
	lw.mu.Lock()
	n := len(lw.buf)
	if !lw.stopped {
		lw.buf = f(lw.buf)
	}
	kept := !lw.stopped && len(lw.buf) <= lw.limit
	if !kept {
		lw.buf = lw.buf[:n]
	}
	lw.mu.Unlock()
	if !kept {
		lw.dropped.Add(1)
		return
	}
	select {
	case lw.wake <- struct{}{}:
	default:
	}
}

// Write adds p as one line (one record of the JSON handler); it never
// fails and never waits.
func (lw *logWriter) Write(p []byte) (int, error) {
	lw.add(func(dst []byte) []byte { return append(dst, p...) })
	return len(p), nil
}

// run writes the buffer out each time lines wait, until close; then it
// writes what is left and ends.
func (lw *logWriter) run() {
	defer close(lw.done)
	var out []byte
	for {
		var ack chan struct{}
		select {
		case <-lw.wake:
		case ack = <-lw.flush:
		case <-lw.stop:
			lw.write(out[:0])
			return
		}
		out = lw.write(out[:0])
		if ack != nil {
			close(ack)
		}
	}
}

// write takes the buffer, leaving spare (empty) in its place, adds the
// notice of the lines dropped since the last one, writes it all and
// returns it for reuse. A failed write (a closed stdout) loses the
// lines, as an unbuffered write would.
func (lw *logWriter) write(spare []byte) []byte {
	lw.mu.Lock()
	out := lw.buf
	lw.buf = spare
	lw.mu.Unlock()
	n := lw.dropped.Load()
	if n != lw.reported && lw.notice != nil {
		out = lw.notice(out, n-lw.reported)
		lw.reported = n
	}
	if len(out) > 0 {
		if _, err := lw.w.Write(out); err != nil {
			return out
		}
	}
	if lw.notice != nil {
		lw.told.Store(n)
	}
	return out
}

// unreported is how many of the lines dropped so far no notice that
// reached w counts: those dropped since the last write, or whose notice
// is stuck in a write that never returned (a stalled reader) or failed.
// Safe to call while the writer runs, or after close abandoned it.
func (lw *logWriter) unreported() uint64 { return lw.dropped.Load() - lw.told.Load() }

// sync waits until the lines added before it are written, at most
// bound; it reports whether they were.
func (lw *logWriter) sync(bound time.Duration) bool {
	t := time.NewTimer(bound)
	defer t.Stop()
	ack := make(chan struct{})
	select {
	case lw.flush <- ack:
	case <-lw.done:
		return false
	case <-t.C:
		return false
	}
	select {
	case <-ack:
		return true
	case <-t.C:
		return false
	}
}

// close drops the lines added from now on and gives the writer at most
// bound to write those before; it reports whether it did. A writer
// that does not finish in time (a write to a pipe nobody reads) is
// abandoned: it never holds up the caller longer than bound. It is
// idempotent.
func (lw *logWriter) close(bound time.Duration) bool {
	lw.mu.Lock()
	if !lw.stopped {
		lw.stopped = true
		close(lw.stop)
	}
	lw.mu.Unlock()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-lw.done:
		return true
	case <-t.C:
		return false
	}
}
