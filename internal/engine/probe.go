package engine

import (
	"context"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// runProbe is the scheduler's job for slot id: probe the contact, apply the
// result, and return when its next probe is due.
func (e *Engine) runProbe(ctx context.Context, id uint32, due time.Time) time.Time {
	target, ok := e.begin(id, e.started(due))
	if !ok {
		return time.Time{}
	}
	return e.complete(ctx, id, e.cfg.Prober.Probe(ctx, target))
}

// startProbe is the scheduler's job for slot id with an AsyncProber: it
// starts the probe and returns; probeDone finishes the job. The probe's
// tag is its slot, so no closure is allocated per probe.
func (e *Engine) startProbe(ctx context.Context, id uint32, due time.Time) {
	if e.dgram != nil {
		e.datagramJob(ctx, id, due)
		return
	}
	target, ok := e.begin(id, e.started(due))
	if !ok {
		e.sched.Finish(id, time.Time{})
		return
	}
	e.async.Start(ctx, target, uint64(id), e.probeDone)
}

// asyncDone is probeDone's method: it applies the result of the
// asynchronous probe of slot tag and finishes its job.
func (e *Engine) asyncDone(tag uint64, res qualify.Result) {
	id := uint32(tag)
	e.sched.Finish(id, e.complete(e.runCtx, id, res))
}

// started returns the start time of a probe that was due at due, and
// reports its lateness.
func (e *Engine) started(due time.Time) time.Time {
	start := e.cfg.Now()
	e.late(start, due)
	return start
}

// complete applies the result of slot id's probe, unless ctx was
// cancelled meanwhile, and returns when the next probe is due.
func (e *Engine) complete(ctx context.Context, id uint32, res qualify.Result) time.Time {
	end := e.cfg.Now()
	if err := ctx.Err(); err != nil {
		e.abandon(id, err)
		return time.Time{}
	}
	return e.finish(id, end, res)
}

// begin marks slot id's probe, started at start, in flight and returns
// its target; false if the contact was removed meanwhile. While the probe
// runs, the slot's next holds its start.
func (e *Engine) begin(id uint32, start time.Time) (qualify.Target, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &e.slots[id]
	if c.zombie {
		return qualify.Target{}, false
	}
	c.running = true
	c.next = e.unix(start)
	return e.target(c), true
}

// released frees a slot whose contact was removed while its probe was
// dispatched or running, once the scheduler says the job has returned.
func (e *Engine) released(id uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.slots[id].zombie {
		e.release(id)
	}
}

// abandon drops the result of a probe cut short by shutdown.
func (e *Engine) abandon(id uint32, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.slots[id].running = false
	e.dismiss(id, err)
}

// finish applies a probe result to slot id, publishes the edges and answers
// the waiters of a manual qualify. It returns the next due time.
func (e *Engine) finish(id uint32, end time.Time, res qualify.Result) time.Time {
	e.mu.Lock()
	c := &e.slots[id]
	c.running = false
	if c.zombie {
		e.mu.Unlock()
		return time.Time{}
	}
	next, name, step := e.apply(id, end, res)
	e.mu.Unlock()
	e.observe(name, res, step)
	return next
}

// apply applies res, ended at end, to slot id: it records the step,
// publishes the edges and answers the waiters of a manual qualify. It
// returns the next due time, and the AoR name and step for observe.
// Called with mu held.
func (e *Engine) apply(id uint32, end time.Time, res qualify.Result) (time.Time, string, qualify.Step) {
	c := &e.slots[id]
	if res.Sent.IsZero() { // nothing was sent: the probe's start stands for it
		res.Sent = e.at(c.next)
	}
	step := c.policy.Observe(c.state, end, res)
	e.record(id, step, end, res)
	e.notify(id, step, res)
	return step.Next, c.name, step
}

// observe counts an applied probe and reports it to Config.Observe.
// Called without mu.
func (e *Engine) observe(name string, res qualify.Result, step qualify.Step) {
	e.probes[step.Reason].Add(1)
	if e.cfg.Observe != nil {
		e.cfg.Observe(name, res, step.OK, step.Reason)
	}
}

// record stores step in slot id and publishes what changed. Called with mu
// held.
func (e *Engine) record(id uint32, step qualify.Step, end time.Time, res qualify.Result) {
	c := &e.slots[id]
	wasRoutable := e.routable(id)
	e.sum.ByStatus[c.state.Status]--
	e.sum.ByStatus[step.State.Status]++
	c.state = step.State
	c.next = e.unix(step.Next)
	c.last = lastResult{at: end.UnixNano(), rtt: c.last.rtt, code: int16(res.Code), reason: step.Reason, ok: step.OK, detail: res.Detail}
	if step.OK {
		c.last.rtt = res.RTT
	}
	if kind := edgeKind(step); kind != 0 {
		ev := e.contactEvent(kind, id, step.From, end)
		ev.Result, ev.Reason = res, step.Reason
		e.publish(ev)
	}
	if now := e.routable(id); now != wasRoutable {
		e.shiftRoutable(c.aor, now, end)
	}
}

// edgeKind returns which event a step publishes, or 0 for none: status
// changes, failures counted towards N, successes counted towards M.
func edgeKind(step qualify.Step) EventKind {
	switch {
	case step.Changed():
		return StatusChanged
	case step.Next.IsZero():
		return 0 // qualify off: a manual probe changes nothing
	case !step.OK && step.State.Phase() == qualify.Suspect:
		return ProbeFailed
	case step.OK && step.State.Phase() == qualify.Recovering:
		return RecoveryProgress
	}
	return 0
}

// shiftRoutable counts a contact of a becoming routable or not, and
// publishes the AoR's availability when it flips. Called with mu held.
func (e *Engine) shiftRoutable(a *aorState, routable bool, now time.Time) {
	before := a.available()
	if routable {
		a.routable++
		e.sum.Routable++
	} else {
		a.routable--
		e.sum.Routable--
	}
	if a.available() != before {
		if before {
			e.sum.AoRsAvailable--
		} else {
			e.sum.AoRsAvailable++
		}
		e.publish(Event{Kind: AvailabilityChanged, Time: now, AoR: a.name, Available: a.available()})
	}
}
