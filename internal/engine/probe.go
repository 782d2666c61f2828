package engine

import (
	"context"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// startProbe is the scheduler's job for slot id, due at due: it starts
// the probe and returns; probeResult finishes the job. The probe's tag is
// its slot, so no closure is allocated per probe.
func (e *Engine) startProbe(ctx context.Context, id uint32, due time.Time) {
	target, next, ok := e.begin(id, e.started(due))
	if !ok {
		e.sched.Finish(id, next)
		return
	}
	e.cfg.Prober.Start(ctx, target, uint64(id), e.probeDone)
}

// probeResult is probeDone's method: it applies the result of slot tag's
// probe, unless Run's context was cancelled meanwhile, and finishes its
// job at the contact's next probe.
func (e *Engine) probeResult(tag uint64, res qualify.Result) {
	id := uint32(tag)
	end := e.cfg.Now()
	var next time.Time
	if err := e.runCtx.Err(); err != nil {
		e.abandon(id, err)
	} else {
		next = e.finish(id, end, res)
	}
	e.sched.Finish(id, next)
}

// started returns the start time of a probe that was due at due, and
// reports its lateness.
func (e *Engine) started(due time.Time) time.Time {
	start := e.cfg.Now()
	if e.cfg.Lateness != nil {
		e.cfg.Lateness(start.Sub(due))
	}
	return start
}

// begin marks slot id's probe, started at start, in flight and returns
// its target; false if the contact was removed meanwhile, or with next
// set if the probe is skipped as quiet (qualify_quiet_only: a periodic
// probe within F of the peer's last final response to a call; never one
// a call brought forward or a manual qualify waits for).
func (e *Engine) begin(id uint32, start time.Time) (t probe.Target, next time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &e.slots[id]
	if c.zombie || c.elsewhere {
		return probe.Target{}, time.Time{}, false
	}
	if !c.urgent && c.alive != 0 && e.waiters[id] == nil {
		if next, skip := c.policy.Quiet(c.state, e.timeOf(c.alive), start); skip {
			c.wait(e.stamp(next))
			e.quiet.Add(1)
			return probe.Target{}, next, false
		}
	}
	c.urgent = false
	c.begin(e.stamp(start))
	return e.target(c), time.Time{}, true
}

// target is what a probe of c needs. Called with mu held.
func (e *Engine) target(c *contact) probe.Target {
	return probe.Target{AoR: c.name, URI: c.uri, Timeout: c.policy.ProbeTimeout(), Options: c.opts}
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

// abandon drops the result of a probe cut short by shutdown: its waiters
// get err, and the contact is not probed again.
func (e *Engine) abandon(id uint32, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.slots[id].wait(0)
	e.dismiss(id, err)
}

// finish applies a probe result to slot id, publishes the edges and answers
// the waiters of a manual qualify. It returns the next due time. The
// result of a contact removed or taken off probing (SetProbed) meanwhile
// is not applied.
func (e *Engine) finish(id uint32, end time.Time, res qualify.Result) time.Time {
	e.mu.Lock()
	if c := &e.slots[id]; c.zombie || c.elsewhere {
		c.wait(0)
		e.mu.Unlock()
		return time.Time{}
	}
	next, name, step := e.applyResult(id, end, res)
	e.mu.Unlock()
	e.observe(name, res, step)
	return next
}

// applyResult applies res, the result of slot id's probe in flight, ended
// at end: it records the step, publishes the edges and answers the
// waiters of a manual qualify. It returns the next due time, and the AoR
// name and step for observe. Called with mu held.
func (e *Engine) applyResult(id uint32, end time.Time, res qualify.Result) (time.Time, string, qualify.Step) {
	c := &e.slots[id]
	if res.Sent.IsZero() { // nothing was sent: the probe's start stands for it
		res.Sent = e.timeOf(c.started())
	}
	if e.held(id, end, res) {
		c.wait(c.until)
		return e.timeOf(c.until), c.name, qualify.Step{State: c.state, From: c.state.Status, Reason: qualify.ReasonDraining}
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
	c.wait(e.stamp(step.Next))
	c.last = lastResult{at: e.stamp(end), rtt: c.last.rtt, code: int16(res.Code), reason: step.Reason, ok: step.OK, detail: res.Detail}
	if step.OK {
		c.last.rtt = rttMicros(res.RTT)
	}
	c.stats.add(step.OK || step.Reason == qualify.ReasonDraining, res.RTT)
	c.until = 0
	if step.State.Draining {
		c.until = e.stamp(step.Next)
	}
	if c.hist {
		c.aor.noteProbe(end, step.OK, res.RTT)
	}
	kind := edgeKind(c.state, step)
	if kind == FailuresCleared && e.noCleared {
		kind = 0
	}
	e.transition(id, step, kind, res, end)
}

// transition puts step's state in slot id at time at, keeps the counts,
// and publishes the edge kind (none when 0) with res and the AoR's
// availability when it flips. Called with mu held.
func (e *Engine) transition(id uint32, step qualify.Step, kind EventKind, res qualify.Result, at time.Time) {
	c := &e.slots[id]
	wasRoutable, wasHeld, wasDraining := e.routable(id), c.aor.drainHeld(), c.state.Draining
	e.sum.ByStatus[c.state.Status]--
	e.sum.ByStatus[step.State.Status]++
	if c.state.Draining != step.State.Draining {
		d := drainDelta(step.State.Draining)
		e.sum.Draining += d
		c.aor.draining += int32(d)
	}
	if pinned(c.state) != pinned(step.State) {
		e.durable++
	}
	c.state = step.State
	if kind != 0 {
		ev := e.contactEvent(kind, id, step.From, at)
		ev.Result, ev.Reason = res, step.Reason
		e.publish(ev)
		if kind == StatusChanged {
			c.aor.noteChange(&ev)
		}
		if wasDraining && !step.State.Draining && kind != StatusChanged && kind != DrainChanged {
			// The drain's end, which the edge published (a failure, a
			// success towards M) does not say: its own event, for those
			// that follow drains (a cluster's vote carries it).
			e.publish(e.contactEvent(DrainChanged, id, step.From, at))
		}
	}
	if now := e.routable(id); now != wasRoutable {
		e.shiftRoutable(c.aor, now, at)
	}
	if held := c.aor.drainHeld(); held != wasHeld {
		e.sum.AoRsDrainHeld += drainDelta(held)
	}
}

// pinned returns st without the loss counts the auto threshold learns
// from, which move at every probe: what Durable counts the changes of.
func pinned(st qualify.State) qualify.State {
	st.Answered, st.Lost = 0, 0
	return st
}

// edgeKind returns which event a step from state was publishes, or 0 for
// none: status changes, failures counted towards N, successes counted
// towards M, the success that ends a suspect's run of failures, and a
// drain's beginning and its end (when nothing else is published; a drain
// that ends with a failure or a success towards M publishes its end
// after that event: transition).
func edgeKind(was qualify.State, step qualify.Step) EventKind {
	switch {
	case step.Changed():
		return StatusChanged
	case step.Next.IsZero():
		return 0 // qualify off: a manual probe changes nothing
	case step.State.Draining && !was.Draining:
		return DrainChanged
	case !step.OK && step.State.Phase() == qualify.Suspect:
		return ProbeFailed
	case step.OK && step.State.Phase() == qualify.Recovering:
		return RecoveryProgress
	case was.Draining && !step.State.Draining:
		return DrainChanged
	case step.OK && was.Phase() == qualify.Suspect:
		return FailuresCleared
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
		a.noteAvailable(now)
	}
}
