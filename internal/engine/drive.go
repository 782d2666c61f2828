package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/schedule"
)

// Job is a probe started by a Driver: the caller sends it (or decides its
// outcome) and hands the result back with Complete.
type Job struct {
	// ID is the contact's slot, to pass to Complete.
	ID uint32
	// Due is when the probe was due.
	Due time.Time
	// Target is the contact to probe, as a Prober would receive it.
	Target qualify.Target
}

// Driver steps an Engine in the caller's time instead of Run's timers and
// goroutines: a discrete-event simulator asks when the next probe is due,
// starts the due probes, decides each outcome, and completes them in time
// order. Each probe goes through the same code as under Run: the
// scheduler's queue and job slots, the engine's begin and finish (Observe,
// counters, events, availability). The engine's Config.Now should return
// the caller's time, and Run must not be called. Config.Lateness is not
// called: a driven probe starts when its caller says. Not safe for
// concurrent use; the engine's other methods are.
type Driver struct {
	e   *Engine
	due []schedule.Job
}

// Driver returns a Driver of e.
func (e *Engine) Driver() *Driver { return &Driver{e: e} }

// Next returns when the earliest waiting probe is due; false when none is.
func (d *Driver) Next() (time.Time, bool) { return d.e.sched.Next() }

// Start starts up to limit probes due at or before now, in due order, and
// appends them to jobs. A probe of a contact removed meanwhile is dropped.
func (d *Driver) Start(now time.Time, limit int, jobs []Job) []Job {
	d.due = d.e.sched.TakeDue(now, limit, d.due[:0])
	for _, j := range d.due {
		target, ok := d.e.begin(j.ID, now)
		if !ok {
			d.e.sched.Done(j.ID, time.Time{})
			continue
		}
		jobs = append(jobs, Job{ID: j.ID, Due: j.Due, Target: target})
	}
	return jobs
}

// Complete applies the result of the started probe id, which ended at end,
// and returns when the contact's next probe is due (zero: none, or the
// contact was removed meanwhile). res.Sent should be the probe's first
// send; when it is zero, the probe's start (Start's now) stands for it.
func (d *Driver) Complete(id uint32, end time.Time, res qualify.Result) time.Time {
	next := d.e.finish(id, end, res)
	d.e.sched.Done(id, next)
	return next
}
