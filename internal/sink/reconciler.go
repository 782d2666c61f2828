package sink

import (
	"cmp"
	"container/heap"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Object is one push: the object, the level to push, and what the
// router last confirmed.
type Object struct {
	Key
	// Level is the level wanted now; never Unknown.
	Level Level
	// From is the level the router last confirmed; Unknown before the
	// first confirmation.
	From Level
	// Retire marks the last push of an object that left the
	// configuration (Level is Up); the reconciler forgets it once pushed.
	Retire bool
	// Held marks an Up pushed in place of a wanted Down while qualifyd
	// panics (see Reconciler.Hold).
	Held bool
	// Seq numbers the sink's wanted changes, from 1, in the order they
	// were set; Time is when the wanted level changed.
	Seq  uint64
	Time time.Time
	// Reason is the failed probe's reason of a Down contact.
	Reason qualify.Reason
}

// driver is what the reconciler drives: one router. Its methods are
// called from the sink's loop goroutine only.
type driver interface {
	// connect opens a session (dial, log in); nil when the router is
	// ready for pushes.
	connect(ctx context.Context) error
	// push sets one object in the router. A *Rejected error means the
	// router answered and refused this object: the session goes on.
	// Any other error ends the session.
	push(ctx context.Context, o Object) error
	// close ends the session; it is idempotent.
	close()
}

// resyncer is a driver that reads back the router's state; a
// differing read-back is pushed again.
type resyncer interface {
	// resync reads the router's state; level returns the router's level
	// of k, and ok false when the router has no object for k (nothing
	// would be pushed).
	resync(ctx context.Context) (level func(k Key) (l Level, ok bool), err error)
}

// phraser is a driver whose router holds its objects in terms of its
// own, which the log's line of a confirmed change uses.
type phraser interface {
	// phrase says that the router now holds level for k, without the
	// sink's name.
	phrase(k Key, level Level) string
}

// heartbeater is a driver that tells its router that qualifyd is alive.
type heartbeater interface {
	heartbeat(ctx context.Context) error
}

// Rejected is a router's refusal of one object's push (an AMI
// "Response: Error", a JSON-RPC error object, a webhook's 4xx). The
// session stays up; Drop says whether the change is given up (a
// webhook's 4xx) or pushed again at the next reconnect or reassert.
type Rejected struct {
	Err  error
	Drop bool
}

func (e *Rejected) Error() string { return e.Err.Error() }
func (e *Rejected) Unwrap() error { return e.Err }

// maxBatch bounds the objects taken from the dirty set at once, so that
// the lock is never held for a whole burst.
const maxBatch = 256

// object flags.
const (
	dirty  uint8 = 1 << iota // queued in Reconciler.queue
	stale                    // push even when confirmed equals wanted
	retire                   // forget once pushed
	first                    // a release pushes it first: it was wanted or confirmed Down
	held                     // wanted Down, pushed Up (see holds)
)

// object is one object's wanted and confirmed level: 24 bytes.
type object struct {
	want, have Level
	flags      uint8
	reason     qualify.Reason
	seq        uint64
	at         int64 // the clock's mono reading of the last wanted change
}

// Stats are a sink's counters at one instant.
type Stats struct {
	// Up is connected: the router answered the last request (a refusal
	// of one object is an answer, counted in Error or Dropped).
	Up bool
	// Objects counts the objects the sink manages.
	Objects int
	// Pending counts the objects whose confirmed level differs from the
	// wanted one (Unknown excluded).
	Pending int
	// Held counts the objects wanted Down and pushed Up instead: gone
	// down during a panic, and not yet down on a probe made after it, or
	// waiting for a panic at the lower mark.
	Held int
	// OK, Error and Dropped count pushes by result.
	OK, Error, Dropped uint64
	// LastSuccess is the time of the last successful request; zero if none.
	LastSuccess time.Time
	// LastError is the text of the last failure; "" if none.
	LastError string
}

// Reconciler holds one sink's objects and pushes their levels through
// its driver. Set and Retire never block on the router; Run is the
// sink's only goroutine.
type Reconciler struct {
	name string
	drv  driver
	iv   Intervals
	// notice logs a failure or a recovery; rand returns [0, 1) for the
	// backoff's jitter.
	notice func(level slog.Level, msg string, attrs ...slog.Attr)
	rand   func() float64
	// reasserts is false for a driver that delivers changes (webhook):
	// a reconnect and the reassert timer push only what is pending. A
	// router that reasserts routes calls, so each change of its
	// confirmed levels is logged (see confirmed).
	reasserts bool
	// vouch, if set, is asked before every heartbeat (Config.Vouch);
	// withheld is whether the last heartbeat was withheld, for logging
	// the change only. Both are the loop goroutine's.
	vouch    func() error
	withheld bool
	// gate, if set, is asked before every push and heartbeat
	// (Config.Gate); the loop goroutine's.
	gate func() (time.Time, error)

	mu      sync.Mutex
	objs    map[Key]object
	queue   []Key // dirty objects, each once
	seq     uint64
	pending int           // objects with wanted(o) != Unknown && have != wanted(o)
	held    int           // objects wanted Down and held (pushed Up)
	hold    bool          // a panic: nothing new goes down (see holds)
	waiting bool          // above the lower mark: a new Down waits (see holds)
	waitFor time.Duration // how long a Down waits at most
	calm    time.Time     // the clock's Mono reading when the last panic ended; zero before any
	// expiries are the lower mark's holds by when their wait ends
	// (expire): a heap, earliest first.
	expiries expiries
	stats    Stats
	wake     chan struct{} // capacity 1: a Set since the loop last looked
	// clock is where the holds read the time; set before the first use
	// (a group shares its own among its reconcilers).
	clock *clock
}

// newReconciler returns a reconciler of drv; notice and rnd may be nil.
func newReconciler(name string, drv driver, iv Intervals, notice func(slog.Level, string, ...slog.Attr), rnd func() float64) *Reconciler {
	if notice == nil {
		notice = func(slog.Level, string, ...slog.Attr) {}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return &Reconciler{name: name, drv: drv, iv: iv, notice: notice, rand: rnd, reasserts: true,
		objs: map[Key]object{}, wake: make(chan struct{}, 1), clock: newClock(Clock{})}
}

// Set records the level wanted for k: O(1), without blocking. Setting
// the level already wanted does nothing; an Unknown level is recorded
// (the object exists) but never pushed. reason is kept with a new level.
func (r *Reconciler) Set(k Key, l Level, reason qualify.Reason) { r.set(k, l, reason, true) }

// set is Set; fresh says whether a Down rests on probes made after the
// last panic ended (see holds). It reports whether k is now held.
func (r *Reconciler) set(k Key, l Level, reason qualify.Reason, fresh bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objs[k]
	h := r.holds(o, ok, l, fresh)
	wasHeld := ok && o.want == Down && o.flags&held != 0
	if ok && o.want == l && wasHeld == h && o.flags&retire == 0 {
		return h
	}
	r.count(o, -1, ok)
	r.seq++
	o.want, o.reason, o.seq, o.at = l, reason, r.seq, r.clock.mono()
	o.flags &^= retire | held
	if h {
		o.flags |= held
	}
	if h && !wasHeld && !r.hold { // the lower mark's: it ends at o.at + waitFor
		heap.Push(&r.expiries, expiry{due: o.at + int64(r.waitFor), key: k, seq: o.seq})
	}
	r.store(k, o)
	return h
}

// Retire pushes Up once for an object that left the configuration, then
// forgets it: qualifyd never leaves a router holding a Down it no longer
// watches. An object never pushed, or confirmed Up, is forgotten at once.
func (r *Reconciler) Retire(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objs[k]
	if !ok || o.flags&retire != 0 {
		return
	}
	if r.forget(o) {
		r.count(o, -1, true)
		delete(r.objs, k)
		return
	}
	r.count(o, -1, true)
	r.seq++
	o.want, o.reason, o.seq, o.at, o.flags = Up, qualify.ReasonNone, r.seq, r.clock.mono(), o.flags|retire
	r.store(k, o)
}

// forget reports whether a retired object needs no last push: a level
// driver's router already holds Up; a webhook was never told of it. A
// level driver pushes Up even for an object it never pushed, as the
// router may hold a Down from an earlier run.
func (r *Reconciler) forget(o object) bool {
	if r.reasserts {
		return o.have == Up
	}
	return o.have == Unknown && o.want == Unknown
}

// Keys calls keep for every object and retires those it rejects.
func (r *Reconciler) Keys(keep func(Key) bool) {
	r.mu.Lock()
	var gone []Key
	for k, o := range r.objs {
		if o.flags&retire == 0 && !keep(k) {
			gone = append(gone, k)
		}
	}
	r.mu.Unlock()
	for _, k := range gone {
		r.Retire(k)
	}
}

// store saves o, queues it when it needs a push, counts it, and wakes the
// loop. Called with mu held.
func (r *Reconciler) store(k Key, o object) {
	if o.want != Unknown && o.flags&dirty == 0 {
		o.flags |= dirty
		r.queue = append(r.queue, k)
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	r.objs[k] = o
	r.count(o, 1, true)
}

// count adds sign to the pending count for o, if it exists and is
// pending. Called with mu held.
func (r *Reconciler) count(o object, sign int, exists bool) {
	if !exists {
		return
	}
	if w := r.wanted(o); w != Unknown && o.have != w {
		r.pending += sign
	}
	if o.want == Down && o.flags&held != 0 {
		r.held += sign
	}
}

// Stats returns the sink's counters.
func (r *Reconciler) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Objects, s.Pending, s.Held = len(r.objs), r.pending, r.held
	return s
}

// ObjectState is one object's levels: the one qualifyd wants the router
// to hold and the one the router last confirmed (Unknown before any).
// Held is set while Up is pushed for an object whose verdict is Down
// (it went down during a panic, and no probe made since the panic ended
// confirmed it): Want is then Up.
type ObjectState struct {
	Key
	Want, Have Level
	Held       bool
}

// Pending reports whether the router does not hold the wanted level yet
// (an object without a verdict is never pending).
func (o ObjectState) Pending() bool { return o.Want != Unknown && o.Want != o.Have }

// Objects returns every object's levels, ordered by kind, name and URI.
func (r *Reconciler) Objects() []ObjectState {
	r.mu.Lock()
	out := make([]ObjectState, 0, len(r.objs))
	for k, o := range r.objs {
		w := r.wanted(o)
		out = append(out, ObjectState{Key: k, Want: w, Have: o.have, Held: w != o.want})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b ObjectState) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name), strings.Compare(a.URI, b.URI))
	})
	return out
}

// requeue queues every object that needs a push: all known levels when
// all is set (a reconnect, a reassert), else those pending.
func (r *Reconciler) requeue(all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.objs {
		if w := r.wanted(o); w == Unknown || (!all && o.have == w) {
			continue
		}
		if all {
			o.flags |= stale
		}
		r.objs[k] = o
		r.enqueue(k)
	}
}

// enqueue queues k if it is not queued. Called with mu held.
func (r *Reconciler) enqueue(k Key) {
	o := r.objs[k]
	if o.flags&dirty != 0 {
		return
	}
	o.flags |= dirty
	r.objs[k] = o
	r.queue = append(r.queue, k)
}

// readBack takes the router's levels as confirmed: an object the router
// holds at another level than confirmed is pending again; one the
// router does not have needs no push.
func (r *Reconciler) readBack(level func(Key) (Level, bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.objs {
		w := r.wanted(o)
		if w == Unknown {
			continue
		}
		l, ok := level(k)
		if !ok {
			l = w
		}
		if l == o.have {
			continue
		}
		r.count(o, -1, true)
		o.have = l
		r.objs[k] = o
		r.count(o, 1, true)
		if o.have != w {
			r.enqueue(k)
		}
	}
}

// take moves up to maxBatch queued objects that need a push into buf.
func (r *Reconciler) take(buf []Object) []Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for ; n < len(r.queue) && len(buf) < maxBatch; n++ {
		k := r.queue[n]
		o, ok := r.objs[k]
		if !ok {
			continue
		}
		o.flags &^= dirty
		r.objs[k] = o
		w := r.wanted(o)
		if w == Unknown || (o.have == w && o.flags&(stale|retire) == 0) {
			continue
		}
		p := Object{Key: k, Level: w, From: o.have, Retire: o.flags&retire != 0, Held: w != o.want,
			Seq: o.seq, Time: r.clock.wallOf(o.at), Reason: o.reason}
		if p.Held {
			p.Reason = qualify.ReasonNone
		}
		buf = append(buf, p)
	}
	r.queue = r.queue[n:]
	if len(r.queue) == 0 {
		r.queue = nil // let a burst's array go
	}
	return buf
}

// putBack queues objects whose push did not happen.
func (r *Reconciler) putBack(objs []Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range objs {
		if _, ok := r.objs[o.Key]; ok {
			r.enqueue(o.Key)
		}
	}
}

// pushed records one push's result: confirmed on success (and forgotten
// if retired), given up on a dropped rejection, left pending otherwise.
func (r *Reconciler) pushed(p Object, rej *Rejected, step *int) {
	if rej == nil {
		r.succeeded(step)
	} else {
		r.notice(slog.LevelWarn, "sink "+r.name+": "+describe(p.Key)+": "+rej.Error())
	}
	if was, ok := r.apply(p, rej); ok && r.reasserts {
		r.confirmed(p.Key, was, p.Level)
	}
}

// apply records p's outcome, and returns the level the router held
// before when it now holds p's (ok).
func (r *Reconciler) apply(p Object, rej *Rejected) (was Level, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rej == nil:
		r.stats.OK++
	case rej.Drop:
		r.stats.Dropped++
		r.stats.Up, r.stats.LastError = true, rej.Error()
	default:
		r.stats.Error++
		r.stats.Up, r.stats.LastError = true, rej.Error()
	}
	o, ok := r.objs[p.Key]
	if !ok || (rej != nil && !rej.Drop) {
		return Unknown, false
	}
	r.count(o, -1, true)
	was = o.have
	o.have = p.Level
	if o.seq == p.Seq {
		o.flags &^= stale
		if o.flags&retire != 0 {
			delete(r.objs, p.Key)
			return was, true
		}
	}
	r.objs[p.Key] = o
	r.count(o, 1, true)
	return was, true
}

// confirmed logs that the router now holds level for k where it held
// was: a change of routing, for the log's record of when calls moved. A
// first confirmation of up (at start, or after the router forgot) is not
// a change and is not logged.
func (r *Reconciler) confirmed(k Key, was, level Level) {
	if level == was || level == Up && was == Unknown {
		return
	}
	line := describe(k) + " is now " + level.String() + " in the router"
	if p, ok := r.drv.(phraser); ok {
		line = p.phrase(k, level)
	}
	r.notice(slog.LevelInfo, "sink "+r.name+": "+line)
}

// describe names k in a log line.
func describe(k Key) string {
	if k.Kind == KindContact {
		return "contact " + k.Name + "/" + k.URI
	}
	return k.Kind.String() + " " + k.Name
}

// adopt takes prev's objects, as confirmed by prev's router, so that a
// replaced sink still retires what its predecessor pushed.
func (r *Reconciler) adopt(prev *Reconciler) {
	prev.mu.Lock()
	objs := make(map[Key]object, len(prev.objs))
	for k, o := range prev.objs {
		o.flags &^= dirty
		objs[k] = o
	}
	seq, calm, ends := prev.seq, prev.calm, slices.Clone(prev.expiries)
	prev.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq = max(r.seq, seq)
	if calm.After(r.calm) {
		r.calm = calm
	}
	for k, o := range objs {
		r.store(k, o)
	}
	r.expiries = append(r.expiries, ends...)
	r.rekey() // prev's holds end by this sink's wait
}
