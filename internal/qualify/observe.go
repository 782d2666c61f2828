package qualify

import "time"

// State is one contact's qualify state: its status, the consecutive
// counters of the contract, whether it is draining, and what
// qualify_failures=auto and qualify_failure_window keep of its history
// (zero without them). The zero value is a new, NonQualified contact. 28
// bytes: a million contacts hold one each.
type State struct {
	Status Status
	// DownProbes counts the failed probes of the current down spell after
	// the one that made the contact Unreachable, up to the first count at
	// which the down backoff has ended (so that a dead contact's state
	// stops changing): it selects the backoff's step (qualify-semantics
	// §7). Zero outside a down spell, and without the backoff; a success
	// while recovering keeps it.
	DownProbes uint8
	// Threshold is the N held by the current run of failures with
	// qualify_failures=auto, taken when the run began; zero outside a run.
	Threshold uint8
	// Spanned reports that the current run has spanned the failure
	// window.
	Spanned bool
	// Draining reports that the peer asked for a pause (a 503 with
	// Retry-After, to a probe or a call): the contact is out of routing
	// until its next probe, which is due when the pause ends
	// (qualify-semantics §11.4).
	Draining bool
	// Failures counts consecutive failed probes while the contact is not
	// Unreachable; it stays at the count that made it Unreachable (N, or
	// more with a window) while Unreachable.
	Failures uint32
	// Successes counts consecutive successes while Unreachable.
	Successes uint32
	// Answered and Lost count the probes the auto threshold learns its
	// loss from (qualify-semantics §5.1): the successes while Reachable and
	// the failures of the runs they ended.
	Answered, Lost uint32
	// RunStart is when the first failure of the current run ended, with
	// qualify_failure_window: Unix milliseconds modulo 2^32, whose
	// differences are exact for 49 days, and a run is checked against its
	// window at every failure, at most R + T <= 2 days apart, until
	// Spanned. Zero otherwise.
	RunStart uint32
}

// Phase returns where the state stands in its failure handling.
func (s State) Phase() Phase {
	switch {
	case s.Draining:
		return Draining
	case s.Status == Unreachable && s.Successes > 0:
		return Recovering
	case s.Status == Unreachable:
		return Down
	case s.Failures > 0:
		return Suspect
	}
	return Healthy
}

// Step is the outcome of Observe.
type Step struct {
	// State is the contact's state after the probe.
	State State
	// From is the status before the probe; the status changed when it
	// differs from State.Status.
	From Status
	// OK reports whether the probe counted as a success.
	OK bool
	// Reason is why the probe failed, ReasonNone when OK.
	Reason Reason
	// Next is when the next probe is due; zero when qualify is off.
	Next time.Time
}

// Changed reports whether the probe changed the contact's status.
func (s Step) Changed() bool { return s.From != s.State.Status }

// Observe applies one probe result to state s and returns the new state and
// when the next probe is due. now is when the probe ended (its final
// response or deadline); r.Sent is its first send, or zero, in which case
// now stands for it.
//
// A 503 with Retry-After is a drain (see Drain), whatever the success
// codes say. Any other result ends a drain.
//
// With qualify off (F = 0) the result is judged but changes nothing, as a
// manual qualify in Asterisk. Observe is pure and does not allocate.
func (p *Policy) Observe(s State, now time.Time, r Result) Step {
	ok, reason := p.Judge(r)
	step := Step{State: s, From: s.Status, OK: ok, Reason: reason}
	if !p.Enabled() {
		return step
	}
	if reason == ReasonDraining {
		return p.Drain(s, now, r.RetryAfter)
	}
	s.Draining = false
	if ok {
		step.State = p.succeed(s)
	} else {
		step.State = p.fail(s, now)
	}
	sent := r.Sent
	if sent.IsZero() {
		sent = now
	}
	step.Next = p.NextDue(step.State, sent, now)
	return step
}

// succeed applies a success: the run of failures ends; an Unreachable
// contact needs M consecutive successes to become Reachable again.
func (p *Policy) succeed(s State) State {
	if s.Status == Reachable {
		s = p.learn(s)
	}
	s.Failures, s.Threshold, s.RunStart, s.Spanned = 0, 0, 0, false
	if s.Status != Unreachable {
		s.Status = Reachable
		s.Successes = 0
		return s
	}
	s.Successes++
	if int(s.Successes) >= p.SuccessThreshold() {
		s.Status = Reachable
		s.Successes, s.DownProbes = 0, 0
	}
	return s
}

// fail applies a failure that ended at now: successes reset; N consecutive
// failures spanning the window make a NonQualified or Reachable contact
// Unreachable. The run's first failure fixes its N and its start.
func (p *Policy) fail(s State, now time.Time) State {
	s.Successes = 0
	if s.Status == Unreachable {
		if p.DownStep(s.DownProbes) < p.EffectiveDownInterval() {
			s.DownProbes++ // stops where the backoff ends: the state stays put
		}
		return s
	}
	if s.Failures == 0 {
		s = p.beginRun(s, now)
	}
	s.Failures++
	s.Spanned = p.spanned(s, now)
	if int(s.Failures) >= p.FailureThresholdFor(s) && (s.Spanned || p.FailureWindow <= 0) {
		s.Status, s.DownProbes = Unreachable, 0
	}
	return s
}

// beginRun holds the run's N (with FailuresAuto) and its start (with a
// window), so that neither moves under the run (qualify-semantics §5.1).
func (p *Policy) beginRun(s State, now time.Time) State {
	if p.FailuresAuto {
		s.Threshold = uint8(p.autoThreshold(s))
	}
	if p.FailureWindow > 0 {
		s.RunStart = uint32(now.UnixMilli())
	}
	return s
}

// spanned reports whether the current run, at a failure that ended at
// now, has spanned the failure window, to the millisecond; never without
// a window, whose state keeps Spanned false.
func (p *Policy) spanned(s State, now time.Time) bool {
	elapsed := time.Duration(uint32(now.UnixMilli())-s.RunStart) * time.Millisecond
	return p.FailureWindow > 0 && (s.Spanned || elapsed >= p.FailureWindow)
}

// NextDue returns when the probe after one that was first sent at sent and
// ended at end is due, for a contact now in state s (the contract's "When
// the next probe is due" table). An interval that falls back to F keeps F's
// send-to-send rhythm, never earlier than end. Zero when qualify is off.
func (p *Policy) NextDue(s State, sent, end time.Time) time.Time {
	if !p.Enabled() {
		return time.Time{}
	}
	var after time.Duration
	switch s.Phase() {
	case Suspect, Recovering:
		after = p.RetryInterval
	case Down:
		after = p.DownStep(s.DownProbes)
	}
	if after > 0 {
		return end.Add(after)
	}
	next := sent.Add(p.Frequency)
	if next.Before(end) {
		return end
	}
	return next
}

// FirstDelay returns the delay of a contact's first probe for a uniform
// random fraction u in [0, 1): u * min(F, maxInitial), where maxInitial <= 0
// means F (Asterisk's max_initial_qualify_time).
func (p *Policy) FirstDelay(maxInitial time.Duration, u float64) time.Duration {
	span := p.Frequency
	if maxInitial > 0 && maxInitial < span {
		span = maxInitial
	}
	return time.Duration(u * float64(span))
}
