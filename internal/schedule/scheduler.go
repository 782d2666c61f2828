package schedule

import (
	"context"
	"math"
	"sync"
	"time"
)

// DefaultMaxInFlight bounds the jobs running at once when Config leaves it
// zero. At 16,667 probes/s and a 3 s timeout a fully dead population keeps
// about 50,000 probes in flight.
const DefaultMaxInFlight = 1 << 17

// dispatchBatch bounds how many due items one pass of the loop takes under
// the lock, so Set and Remove never wait long.
const dispatchBatch = 1024

// StartFunc starts the job of item id, which was due at due, without
// waiting for it: the dispatching goroutine (Run's loop, or the caller of
// StartDue) calls it, so it must not block. The job ends when its owner
// calls Finish, possibly before StartFunc returns. No goroutine waits for
// a job in flight: at a million contacts a dead population keeps 50,000
// probes in flight.
type StartFunc func(ctx context.Context, id ID, due time.Time)

// Config tunes a Scheduler. The zero value works.
type Config struct {
	// MaxInFlight bounds the jobs running at once; due items wait beyond
	// it. Zero means DefaultMaxInFlight.
	MaxInFlight int
	// Released, if set, is called with the ID of an item that was removed
	// while its job ran, once that job has finished: from then on the owner
	// may reuse the ID. It runs in the goroutine that calls Finish, without
	// locks held.
	Released func(id ID)
	// Coalesce, when positive, is the shortest sleep of the loop: when
	// the next item is due sooner, the loop sleeps Coalesce and starts
	// every item due by then together, each at most Coalesce late. Under
	// load this turns one wake-up per job into one per Coalesce. Zero
	// starts every item at its due time.
	Coalesce time.Duration
	// Now returns the current time; nil means time.Now. A caller that
	// drives the scheduler itself (StartDue) in virtual time sets it, so
	// that the epoch and the due items are virtual too.
	Now func() time.Time
}

// Scheduler runs items when they are due, never two jobs of one item at
// once. Its methods are safe for concurrent use; Run is the single loop and
// may be called once.
type Scheduler struct {
	start    StartFunc
	released func(ID)
	max      int
	coalesce int64 // Config.Coalesce in nanoseconds
	epoch    time.Time
	now      func() time.Time
	wake     chan struct{}  // capacity 1: the loop has something to look at
	wg       sync.WaitGroup // jobs started and not finished
	// batch holds the items of one dispatch; used only by the one
	// dispatching goroutine (Run's loop or StartDue's caller).
	batch []entry

	mu       sync.Mutex // guards the fields below
	q        queue
	deferred map[ID]int64 // Set while the item's job runs: applied when it ends
	inFlight int
	armed    int64 // the due time the loop sleeps until; MaxInt64 when none
	starved  bool  // the loop waits for a running job to finish
}

// New returns a Scheduler that starts each due item with start once Run
// runs (or when StartDue is called); each job ends with Finish.
func New(cfg Config, start StartFunc) *Scheduler {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{
		start:    start,
		released: cfg.Released,
		max:      cfg.MaxInFlight,
		coalesce: int64(cfg.Coalesce),
		epoch:    cfg.Now(),
		now:      cfg.Now,
		wake:     make(chan struct{}, 1),
		deferred: map[ID]int64{},
		armed:    math.MaxInt64,
		batch:    make([]entry, 0, dispatchBatch),
	}
}

// Set makes id due at due, inserting it or moving it. If id's job is
// running, the new time replaces the one the job returns.
func (s *Scheduler) Set(id ID, due time.Time) {
	d := int64(due.Sub(s.epoch))
	s.mu.Lock()
	switch s.q.state(id) {
	case running, cancelled:
		s.q.mark(id, running)
		s.deferred[id] = d
		s.mu.Unlock()
		return
	}
	s.q.set(id, d)
	poke := s.arm(d)
	s.mu.Unlock()
	if poke {
		s.poke()
	}
}

// arm lowers the loop's wake-up time to d and reports whether the loop must
// be poked for it. Called with mu held.
func (s *Scheduler) arm(d int64) bool {
	if d >= s.armed {
		return false
	}
	s.armed = d
	return true
}

// Reserve makes room for items with IDs below n without growing the
// queue again, as an owner that knows its size calls before adding them.
func (s *Scheduler) Reserve(n int) {
	s.mu.Lock()
	s.q.reserve(n)
	s.mu.Unlock()
}

// Remove takes id out of the schedule. It reports whether a job of id is
// running now; that job still returns, and its next time is then ignored.
func (s *Scheduler) Remove(id ID) (jobRunning bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.deferred, id)
	switch s.q.state(id) {
	case running, cancelled:
		s.q.mark(id, cancelled)
		return true
	}
	s.q.remove(id)
	return false
}

// Due returns when id is due, if it is waiting.
func (s *Scheduler) Due(id ID) (time.Time, bool) {
	s.mu.Lock()
	d, ok := s.q.due(id)
	s.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	return s.epoch.Add(time.Duration(d)), true
}

// Stats is a snapshot of the scheduler's load.
type Stats struct {
	Waiting  int // items in the queue
	InFlight int // jobs running
	// Overdue is how long ago the earliest waiting item fell due; zero
	// when none is past due. A loop that runs keeps it within its
	// coalescing window (and the in-flight bound's queue); one that is
	// stuck lets it grow without bound.
	Overdue time.Duration
}

// Stats returns the current load.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Waiting: s.q.len(), InFlight: s.inFlight}
	if st.Waiting > 0 {
		if late := s.now().Sub(s.epoch.Add(time.Duration(s.q.min().due))); late > 0 {
			st.Overdue = late
		}
	}
	return st
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run is the scheduler loop. It starts due items until ctx is cancelled,
// then waits for the started jobs to be finished.
func (s *Scheduler) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer s.wg.Wait()
	for {
		sleep := s.dispatch(ctx)
		if sleep == 0 {
			continue
		}
		if !s.wait(ctx, timer, sleep) {
			return
		}
	}
}

// dispatch starts up to a batch of the items due now and returns how long
// to sleep after it (see take). Run's loop and StartDue share it.
func (s *Scheduler) dispatch(ctx context.Context) time.Duration {
	var sleep time.Duration
	s.batch, sleep = s.take(s.batch[:0])
	for _, e := range s.batch {
		s.wg.Add(1)
		s.start(ctx, e.id, s.epoch.Add(time.Duration(e.due)))
	}
	return sleep
}

// take moves due items into batch, marking them running, and returns how
// long to sleep after dispatching them: 0 to look again at once, negative to
// sleep until poked.
func (s *Scheduler) take(batch []entry) ([]entry, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := int64(s.now().Sub(s.epoch))
	for len(batch) < cap(batch) {
		e, ok := s.popDue(now)
		if !ok {
			break
		}
		batch = append(batch, e)
	}
	s.starved = false
	switch {
	case s.q.len() == 0:
		s.armed = math.MaxInt64
		return batch, -1
	case s.q.min().due > now:
		s.armed = s.q.min().due
		return batch, time.Duration(max(s.armed-now, s.coalesce))
	case s.inFlight >= s.max:
		s.starved = true
		s.armed = math.MinInt64 // no Set needs to poke: Finish pokes when a slot frees
		return batch, -1
	}
	return batch, 0
}

// wait sleeps for d (until poked when negative); false when ctx is done.
func (s *Scheduler) wait(ctx context.Context, timer *time.Timer, d time.Duration) bool {
	var tc <-chan time.Time
	if d > 0 {
		timer.Reset(d)
		tc = timer.C
		defer timer.Stop()
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.wake:
	case <-tc:
	}
	return true
}

// Finish ends a job started by the StartFunc: it frees its job slot, puts
// the item back in the heap (due at next, zero: not until Set; at the time
// of a Set made while it ran; never if it was removed meanwhile, see
// Config.Released), and wakes the loop if that is needed. It may be called
// from any goroutine, with Run's loop running or not.
func (s *Scheduler) Finish(id ID, next time.Time) {
	s.mu.Lock()
	s.inFlight--
	poke, removed := s.finish(id, next)
	poke = poke || s.starved
	s.starved = false
	s.mu.Unlock()
	if poke {
		s.poke()
	}
	if removed && s.released != nil {
		s.released(id)
	}
	s.wg.Done() // last: Run returns only once the owner has its ID back
}

// finish requeues id after its job: at the deferred time if Set was called
// meanwhile, else at next; not at all if it was removed. It reports whether
// the loop must be poked, and whether the item had been removed. Called
// with mu held.
func (s *Scheduler) finish(id ID, next time.Time) (poke, removed bool) {
	state := s.q.state(id)
	d, set := s.deferred[id]
	delete(s.deferred, id)
	s.q.mark(id, idle)
	if state == cancelled {
		return false, true
	}
	if !set {
		if next.IsZero() {
			return false, false
		}
		d = int64(next.Sub(s.epoch))
	}
	s.q.set(id, d)
	return s.arm(d), false
}
