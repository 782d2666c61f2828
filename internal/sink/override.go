package sink

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// The two overrides of the wanted levels, one mechanism: an Up pushed in
// place of a wanted Down. A panic holds what goes down while it lasts,
// until a probe made after it confirms it (holds); a release (Release)
// retires every object a router may hold Down, as a sink leaves
// qualifyd's watch.

// wanted is the level pushed for o: its wanted level, but Up in place of
// a held Down. Called with mu held.
func (r *Reconciler) wanted(o object) Level {
	if o.want == Down && o.flags&held != 0 {
		return Up
	}
	return o.want
}

// holds reports whether the Down of o (ok: o exists), wanted at level
// l now, is held, pushed Up in its place (qualify-semantics §6.1):
// during a panic every object that goes down (an object down when the
// panic began stays down, one held stays held); short of a panic, while
// the failing share is above the lower mark (waiting), an object that
// goes down from Up, until waitFor after it was held, in case the share
// is still climbing to a panic; after a panic, an object held before it
// ended until fresh, its Down resting on probes made after the end.
// Called with mu held.
func (r *Reconciler) holds(o object, ok bool, l Level, fresh bool) bool {
	if l != Down {
		return false
	}
	switch wasHeld := ok && o.want == Down && o.flags&held != 0; {
	case r.hold:
		return wasHeld || !ok || o.want != Down
	case wasHeld && (r.calm.IsZero() || r.clock.epoch.Add(time.Duration(o.at)).After(r.calm)):
		return r.clock.mono() < o.at+int64(r.waitFor)
	case wasHeld:
		return !fresh
	}
	return r.waiting && ok && o.want == Up
}

// TakeBack holds k's Down, pushing Up in its place, as a panic holds an
// object that goes down while it lasts: the panic's beginning takes back
// the downs of its own event (Group.takeBack). It reports whether it did:
// an object not wanted Down, already held or retired is left as it is.
func (r *Reconciler) TakeBack(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objs[k]
	if !ok || o.want != Down || o.flags&(held|retire) != 0 {
		return false
	}
	r.count(o, -1, true)
	r.seq++
	o.seq, o.at = r.seq, r.clock.mono()
	o.flags |= held
	r.store(k, o)
	return true
}

// Hold, while on, holds every object that goes down (see holds): the
// panic's rule, only ups while it lasts. Turning it on or off pushes
// nothing by itself: what was down stays down, what is held stays held
// until set again; turning it off records the panic's end (calm).
func (r *Reconciler) Hold(on bool) {
	r.mu.Lock()
	if r.hold && !on {
		r.calm = r.clock.monoNow()
	}
	r.hold = on
	r.mu.Unlock()
}

// Wait, while on, holds an object that goes down from Up for at most
// bound (see holds): the lower mark's rule, a Down waiting for a panic
// that may be coming. Turning it off lets go of nothing by itself: a
// held object is pushed down when its bound ends (expire). A new bound
// (a reload) moves the end of every wait already running; the Group
// re-arms its timer at each reload.
func (r *Reconciler) Wait(on bool, bound time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	moved := bound != r.waitFor
	r.waiting, r.waitFor = on, bound
	if moved {
		r.rekey()
	}
}

// rekey sets every hold's end in expiries to waitFor after it was held,
// dropping those whose object was set since. O(n). Called with mu held.
func (r *Reconciler) rekey() {
	kept := r.expiries[:0]
	for _, e := range r.expiries {
		if o, ok := r.objs[e.key]; ok && o.seq == e.seq {
			e.due = o.at + int64(r.waitFor)
			kept = append(kept, e)
		}
	}
	r.expiries = kept
	heap.Init(&r.expiries)
}

// expire pushes down every object the lower mark held whose wait has
// ended (see holds), at once rather than at its next Set, and returns
// the clock's mono reading when the next wait ends (false: none). A hold
// the panic has taken over, or whose object was set since, is left to
// its own rule. O(log n) per hold.
func (r *Reconciler) expire() (next int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.mono()
	for len(r.expiries) > 0 && r.expiries[0].due <= now {
		e := heap.Pop(&r.expiries).(expiry)
		o, ok := r.objs[e.key]
		if !ok || o.seq != e.seq || o.want != Down || o.flags&held == 0 || r.holds(o, true, Down, false) {
			continue
		}
		r.count(o, -1, true)
		r.seq++
		o.seq = r.seq
		o.flags &^= held
		r.store(e.key, o)
	}
	if len(r.expiries) == 0 {
		return 0, false
	}
	return r.expiries[0].due, true
}

// expiry is when the lower mark's hold of key, set at seq, ends: due, a
// mono reading (see clock.mono).
type expiry struct {
	due int64
	key Key
	seq uint64
}

// expiries is a min-heap of expiry by due (container/heap).
type expiries []expiry

func (h expiries) Len() int           { return len(h) }
func (h expiries) Less(i, j int) bool { return h[i].due < h[j].due }
func (h expiries) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiries) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiries) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// isHeld reports whether k is held.
func (r *Reconciler) isHeld(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objs[k]
	return ok && o.want == Down && o.flags&held != 0
}

// heldKeys calls fn with every held object. Called without mu; fn must
// not call r.
func (r *Reconciler) heldKeys(fn func(Key)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.objs {
		if o.want == Down && o.flags&held != 0 {
			fn(k)
		}
	}
}

// Release pushes Up once for every object the router may hold Down and
// forgets every object, then returns how many of those the router
// confirmed (released) and how many it had not by the time ctx was done
// (failed). The sink's loop must not run. With all, every object is
// pushed, as for a router whose levels qualifyd does not know (`qualifyd
// release`); else a level driver's objects not confirmed Up and a
// webhook's delivered Down. The downs go first (those wanted Down, and
// those the router confirmed or reads back Down), so that a release cut
// short by its timeout leaves as few Downs as it can, and the pushes go
// through the driver's batcher, several in flight, when it has one.
func (r *Reconciler) Release(ctx context.Context, all bool) (released, failed int) {
	released, failed, _ = r.release(ctx, all)
	return released, failed
}

// release is Release, and also returns how many objects went first
// (downs).
func (r *Reconciler) release(ctx context.Context, all bool) (released, failed, downs int) {
	n := r.releaseAll(all)
	downs = r.drain(ctx)
	left := r.Stats().Objects
	return n - left, left, downs
}

// releaseAll retires the objects that need a push Up and forgets the
// others; it returns how many it retired.
func (r *Reconciler) releaseAll(all bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.mono()
	for k, o := range r.objs {
		r.count(o, -1, true)
		if !all && !r.mayHoldDown(o) {
			delete(r.objs, k)
			continue
		}
		if o.want == Down || o.have == Down {
			o.flags |= first
		}
		r.seq++
		o.want, o.reason, o.seq, o.at, o.flags = Up, qualify.ReasonNone, r.seq, now, o.flags|retire
		r.store(k, o)
	}
	return len(r.objs)
}

// downsFirst orders the queue: the objects a release pushes first (see
// releaseAll), or that the router holds Down, ahead of the others. It
// returns how many went first.
func (r *Reconciler) downsFirst() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.SortStableFunc(r.queue, func(a, b Key) int {
		return cmp.Compare(r.rank(a), r.rank(b))
	})
	n := 0
	for n < len(r.queue) && r.rank(r.queue[n]) == 0 {
		n++
	}
	return n
}

// rank is 0 for an object that goes first, else 1. Called with mu held.
func (r *Reconciler) rank(k Key) int {
	if o := r.objs[k]; o.flags&first != 0 || o.have == Down {
		return 0
	}
	return 1
}

// mayHoldDown reports whether o's router may hold it Down: a level
// driver's router unless it confirmed Up (it may hold a Down from an
// earlier run), a webhook's receiver when Down was delivered. Called
// with mu held.
func (r *Reconciler) mayHoldDown(o object) bool {
	if r.reasserts {
		return o.have != Up
	}
	return o.have == Down
}

// drain connects and pushes what is queued until it is pushed or ctx is
// done, reconnecting with backoff; it closes the session. A resync first
// learns the router's objects (a Kamailio's destinations). It returns how
// many objects the first session's queue put first (see downsFirst).
func (r *Reconciler) drain(ctx context.Context) (downs int) {
	once := false
	r.reconnect(ctx, func(step *int) error {
		if err := r.ticks(ctx, true, false, step); err != nil {
			return err
		}
		r.requeue(false)
		if n := r.downsFirst(); !once {
			downs, once = n, true
		}
		return r.pushBurst(ctx, step)
	})
	return downs
}
