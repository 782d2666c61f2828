package sink

import (
	"context"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// The two overrides of the wanted levels, one mechanism: an Up pushed in
// place of a wanted Down. A panic holds a reconciler (Hold) while the
// verdicts go on changing underneath; a release (Release) retires every
// object a router may hold Down, as a sink leaves qualifyd's watch.

// wanted is the level pushed for o: its wanted level, but Up in place of
// Down while held. Called with mu held.
func (r *Reconciler) wanted(o object) Level {
	if r.hold && o.want == Down {
		return Up
	}
	return o.want
}

// Hold, while on, pushes Up for every object wanted Down, and off pushes
// the wanted levels again: the panic's override (route to all when a
// mass outage is more likely qualifyd's own). The wanted levels go on
// changing underneath; only what is pushed changes. O(objects), once per
// change of on.
func (r *Reconciler) Hold(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold == on {
		return
	}
	down := make([]Key, 0, r.downs)
	for k, o := range r.objs {
		if o.want == Down {
			r.count(o, -1, true)
			down = append(down, k)
		}
	}
	r.hold = on
	now := time.Now().UnixNano()
	for _, k := range down {
		o := r.objs[k]
		r.seq++
		o.seq, o.at = r.seq, now
		r.store(k, o)
	}
}

// Release pushes Up once for every object the router may hold Down and
// forgets every object, then returns how many of those the router
// confirmed (released) and how many it had not by the time ctx was done
// (failed). The sink's loop must not run. With all, every object is
// pushed, as for a router whose levels qualifyd does not know (`qualifyd
// release`); else a level driver's objects not confirmed Up and a
// webhook's delivered Down.
func (r *Reconciler) Release(ctx context.Context, all bool) (released, failed int) {
	n := r.releaseAll(all)
	r.drain(ctx)
	left := r.Stats().Objects
	return n - left, left
}

// releaseAll retires the objects that need a push Up and forgets the
// others; it returns how many it retired.
func (r *Reconciler) releaseAll(all bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UnixNano()
	for k, o := range r.objs {
		r.count(o, -1, true)
		if !all && !r.mayHoldDown(o) {
			delete(r.objs, k)
			continue
		}
		r.seq++
		o.want, o.reason, o.seq, o.at, o.flags = Up, qualify.ReasonNone, r.seq, now, o.flags|retire
		r.store(k, o)
	}
	return len(r.objs)
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
// learns the router's objects (a Kamailio's destinations).
func (r *Reconciler) drain(ctx context.Context) {
	r.reconnect(ctx, func(step *int) error {
		if err := r.ticks(ctx, true, false, step); err != nil {
			return err
		}
		r.requeue(false)
		return r.pushAll(ctx, nil, step)
	})
}
