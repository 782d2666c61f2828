package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Observe applies a batch of call outcomes (qualify-semantics §11): each
// to every contact it concerns, at once, under the engine's lock. A call
// that indicts the peer brings the contact's next probe forward (Pull),
// one that proves it alive is remembered for qualify_quiet_only, and a
// 503 with Retry-After drains the contact. None decides a status. It
// returns what it took and dropped: malformed, stale (Time out of
// [now-observe.MaxAge, now+observe.MaxSkew]) and unknown observations
// (no contact probed here matches). It never blocks and queues nothing;
// the first Observe after an Apply indexes the contacts by destination,
// a pass over the table.
func (e *Engine) Observe(batch []observe.Observation) observe.Tally {
	now := e.cfg.Now()
	var t observe.Tally
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range batch {
		o := &batch[i]
		switch {
		case o.Validate() != nil:
			t.Dropped[observe.DropMalformed]++
		case !o.Fresh(now):
			t.Dropped[observe.DropStale]++
		case e.hearAll(o, now) == 0:
			t.Dropped[observe.DropUnknown]++
		default:
			t.Accepted++
			t.BySource[o.Source][o.Outcome]++
		}
	}
	return t
}

// hearAll applies o to the contacts it names and returns how many it
// applied to. Called with mu held.
func (e *Engine) hearAll(o *observe.Observation, now time.Time) int {
	n := 0
	if o.AoR == "" {
		for _, id := range e.destinationOf(o.Destination) {
			n += e.hear(id, o, now)
		}
		return n
	}
	a, ok := e.aors[o.AoR]
	if !ok {
		return 0
	}
	for _, id := range a.ids {
		if o.Contact == "" || e.slots[id].uri == o.Contact {
			n += e.hear(id, o, now)
		}
	}
	return n
}

// hear applies o, taken at now, to slot id, and returns 1, or 0 for a
// contact not qualified here. Called with mu held.
func (e *Engine) hear(id uint32, o *observe.Observation, now time.Time) int {
	c := &e.slots[id]
	if c.zombie || c.elsewhere || !c.policy.Enabled() {
		return 0
	}
	at := o.Time
	if at.IsZero() || at.After(now) {
		at = now
	}
	r := callResult(o)
	verdict := c.policy.JudgeCall(r)
	if c.hist {
		c.aor.noteCall(now, verdict == qualify.CallSuspect)
	}
	switch verdict {
	case qualify.CallAlive:
		c.alive = max(c.alive, e.stamp(at))
	case qualify.CallSuspect:
		e.pull(id, now)
	case qualify.CallDrain:
		e.drain(id, at, now, r)
	}
	return 1
}

// callResult is o as the core judges a call.
func callResult(o *observe.Observation) qualify.Result {
	r := qualify.Result{Code: o.Code, RetryAfter: o.RetryAfter}
	switch o.Outcome {
	case observe.Answered:
		r.Code = max(r.Code, 200)
	case observe.Timeout:
		r.Reason = qualify.ReasonTimeout
	case observe.Transport:
		r.Reason = qualify.ReasonTransport
	}
	return r
}

// pull brings slot id's next probe forward after a call that indicts
// its peer, observed at now (qualify.Policy.Pull): unless a probe is in
// flight, or one a call brought forward is still to start. Called with
// mu held.
func (e *Engine) pull(id uint32, now time.Time) {
	c := &e.slots[id]
	if c.running || c.urgent || c.due() == 0 {
		return
	}
	due := e.timeOf(c.due())
	last := e.timeOf(c.last.at)
	if next := c.policy.Pull(c.state, last, due, now); next.Before(due) {
		c.urgent = true
		c.wait(e.stamp(next))
		e.sched.Set(id, next)
		e.pulled.Add(1)
	}
}

// drain applies a call's 503 with Retry-After, answered at at and
// taken at now, to slot id: the contact drains until its next probe
// (qualify.Policy.Drain). A probe in flight decides nothing before the
// drain ends (held). A pause already over when taken (a late report)
// only proves the peer alive. Called with mu held.
func (e *Engine) drain(id uint32, at, now time.Time, r qualify.Result) {
	c := &e.slots[id]
	step := c.policy.Drain(c.state, at, r.RetryAfter)
	if !step.Next.After(now) {
		c.alive = max(c.alive, e.stamp(at))
		return
	}
	c.until = e.stamp(step.Next)
	if !c.running {
		c.urgent = false
		c.wait(c.until)
		e.sched.Set(id, step.Next)
	}
	e.transition(id, step, edgeKind(c.state, step), r, now)
}

// held reports whether the result res of slot id's probe, ended at end,
// is held back by a drain a call began while the probe was in flight:
// the pause the peer asked for holds until its end, unless the probe
// itself found the peer draining again or a manual qualify waits for
// it. Called with mu held.
func (e *Engine) held(id uint32, end time.Time, res qualify.Result) bool {
	c := &e.slots[id]
	if !c.state.Draining || c.until == 0 || e.waiters[id] != nil {
		return false
	}
	return e.stamp(end) < c.until && !res.Draining()
}

// destinationOf returns the slots of the contacts at d, written as
// HostPort writes it or, failing that, as observe.Destination reads it
// (a host without its port, a SIP URI). Called with mu held.
func (e *Engine) destinationOf(d string) []uint32 {
	if ids := e.destination(d); len(ids) > 0 {
		return ids
	}
	if nd, ok := observe.Destination(d); ok && nd != d {
		return e.destination(nd)
	}
	return nil
}

// destination returns the slots of the contacts whose URI has the
// destination d (observe.HostPort), indexing them first after an Apply.
// Called with mu held.
func (e *Engine) destination(d string) []uint32 {
	if e.dests == nil {
		e.dests = map[string][]uint32{}
		for _, a := range e.order {
			for _, id := range a.ids {
				if hp, ok := observe.HostPort(e.slots[id].uri); ok {
					e.dests[hp] = append(e.dests[hp], id)
				}
			}
		}
	}
	return e.dests[d]
}

// drainDelta is the change of Summary.Draining when a contact begins
// draining (+1) or ends (-1).
func drainDelta(draining bool) int {
	if draining {
		return 1
	}
	return -1
}
