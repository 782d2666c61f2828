package schedule

import "time"

// Job is a due item handed to a caller that drives the scheduler itself.
type Job struct {
	// ID is the item.
	ID ID
	// Due is when it was due.
	Due time.Time
}

// Next returns when the earliest waiting item is due; false when none is
// waiting.
//
// Next, TakeDue and Done drive the scheduler without Run: a caller that
// keeps its own (virtual) time takes the due items, runs their jobs however
// it likes, and ends each with Done. They use the same queue, job slots and
// bookkeeping as Run's loop and jobs, which must not run at the same time.
func (s *Scheduler) Next() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.len() == 0 {
		return time.Time{}, false
	}
	return s.epoch.Add(time.Duration(s.q.min().due)), true
}

// TakeDue marks up to limit items due at or before now as running, in due
// order, and appends them to jobs. It takes fewer when MaxInFlight jobs are
// running. Each taken item must be ended with Done.
func (s *Scheduler) TakeDue(now time.Time, limit int, jobs []Job) []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := int64(now.Sub(s.epoch))
	for range limit {
		e, ok := s.popDue(d)
		if !ok {
			break
		}
		jobs = append(jobs, Job{ID: e.id, Due: s.epoch.Add(time.Duration(e.due))})
	}
	return jobs
}

// Done ends the job of id taken by TakeDue, as a job run by Run ends: the
// item is due again at next (zero: not until Set), at the time of a Set made
// while it ran, or never if it was removed meanwhile, in which case
// Config.Released is called.
func (s *Scheduler) Done(id ID, next time.Time) { s.done(id, next) }

// popDue takes the earliest item if it is due at now (nanoseconds since the
// epoch) and a job slot is free, and marks it running. Run's loop and
// TakeDue share it. Called with mu held.
func (s *Scheduler) popDue(now int64) (entry, bool) {
	if s.q.len() == 0 || s.q.min().due > now || s.inFlight >= s.max {
		return entry{}, false
	}
	e := s.q.pop()
	s.q.mark(e.id, running)
	s.inFlight++
	return e, true
}
