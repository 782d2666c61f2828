package schedule

import (
	"context"
	"time"
)

// Next returns when the earliest waiting item is due; false when none is
// waiting.
//
// Next and StartDue drive the scheduler without Run: a caller that keeps
// its own (virtual) time in Config.Now asks when the next item is due,
// moves its clock there and starts the due items. The jobs start and end
// as under Run (the StartFunc, Finish), with the same queue, job slots and
// bookkeeping; Run must not run at the same time.
func (s *Scheduler) Next() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.len() == 0 {
		return time.Time{}, false
	}
	return s.epoch.Add(time.Duration(s.q.min().due)), true
}

// StartDue starts every item due at Config.Now, in due order, as Run's
// loop would, in the caller's goroutine: fewer when MaxInFlight jobs are
// running. Not safe for concurrent use with itself or Run.
func (s *Scheduler) StartDue(ctx context.Context) {
	for s.dispatch(ctx) == 0 {
	}
}

// popDue takes the earliest item if it is due at now (nanoseconds since the
// epoch) and a job slot is free, and marks it running. Called with mu held.
func (s *Scheduler) popDue(now int64) (entry, bool) {
	if s.q.len() == 0 || s.q.min().due > now || s.inFlight >= s.max {
		return entry{}, false
	}
	e := s.q.pop()
	s.q.mark(e.id, running)
	s.inFlight++
	return e, true
}
