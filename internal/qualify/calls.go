package qualify

import "time"

// Call is what one call's outcome says of a contact (qualify-semantics
// §11). Only probes decide a status: a call never makes a contact
// Unreachable or Reachable.
type Call uint8

const (
	// CallNone: the call says nothing (qualify off).
	CallNone Call = iota
	// CallAlive: the peer gave a final response that does not indict it
	// (a 2xx, a 486, a 404): it is alive, and with qualify_quiet_only a
	// periodic probe within F of it is skipped.
	CallAlive
	// CallSuspect: the call failed in a way that indicts the peer (the
	// INVITE transaction timed out, the transport failed, or a final
	// response of qualify_call_failure_codes): probe now (see Pull).
	CallSuspect
	// CallDrain: a 503 with Retry-After: the peer is draining (see Drain).
	CallDrain
)

var callLabels = [...]string{"none", "alive", "suspect", "drain"}

// String returns the verdict's lower-case name.
func (c Call) String() string {
	if int(c) < len(callLabels) {
		return callLabels[c]
	}
	return "call(?)"
}

// JudgeCall classifies the outcome of one call towards a contact: r as a
// probe's, Code the final response (0 without one), Reason why there was
// none (ReasonTimeout, ReasonTransport), RetryAfter a 503's.
func (p *Policy) JudgeCall(r Result) Call {
	switch {
	case !p.Enabled():
		return CallNone
	case r.Reason != ReasonNone || r.Code < 200:
		return CallSuspect
	case r.Draining():
		return CallDrain
	case p.callFailureCodes().Contains(r.Code):
		return CallSuspect
	}
	return CallAlive
}

// Draining reports whether r is a peer asking for a pause: a 503 with
// Retry-After.
func (r Result) Draining() bool { return r.Code == 503 && r.RetryAfter > 0 }

// callFailureCodes returns qualify_call_failure_codes, the default
// resolved.
func (p *Policy) callFailureCodes() Codes {
	if p.CallFailureCodes.Empty() {
		return DefaultCallFailureCodes
	}
	return p.CallFailureCodes
}

// drainMax returns qualify_drain_max, the default resolved.
func (p *Policy) drainMax() time.Duration {
	if p.DrainMax <= 0 {
		return DefaultDrainMax
	}
	return p.DrainMax
}

// Drain applies a peer's request for a pause, answered at now with
// Retry-After retryAfter, to a contact in state s: the contact drains,
// out of routing, until its next probe, due min(retryAfter,
// qualify_drain_max) later. It counts as no failure: a suspect contact's
// run of failures ends (the peer answered), and the status stays as it
// is, so that an Unreachable contact still needs M successes. Drain is
// pure; with qualify off it changes nothing.
func (p *Policy) Drain(s State, now time.Time, retryAfter time.Duration) Step {
	step := Step{State: s, From: s.Status, Reason: ReasonDraining}
	if !p.Enabled() {
		return step
	}
	if s.Status != Unreachable {
		s.Failures, s.Threshold, s.RunStart, s.Spanned = 0, 0, 0, false
	}
	s.Successes, s.Draining = 0, true
	step.State = s
	step.Next = now.Add(min(max(retryAfter, time.Second), p.drainMax()))
	return step
}

// Pull returns when the next probe of a contact in state s is due after
// a call that indicts its peer (CallSuspect), observed at now: at once,
// as after a failed probe, but no sooner than PullGap after the end of
// its last probe, last, so that a burst of failed calls costs a probe
// every PullGap at most; never later than due, the probe already
// scheduled. A contact that is down, recovering or draining keeps due:
// its probes already decide (qualify-semantics §11.2).
func (p *Policy) Pull(s State, last, due, now time.Time) time.Time {
	switch s.Phase() {
	case Down, Recovering, Draining:
		return due
	}
	at := now
	if !last.IsZero() {
		at = maxTime(now, last.Add(p.PullGap()))
	}
	if !due.IsZero() && due.Before(at) {
		return due
	}
	return at
}

// PullGap is the least time from the end of a contact's last probe to a
// probe a failed call brings forward: the retry interval R or the probe
// timeout T, whichever is shorter (T when R is unset), so that calls
// never probe a trunk faster than its own fast retry would, nor a
// trunk without one more than once a timeout.
func (p *Policy) PullGap() time.Duration {
	if p.RetryInterval > 0 {
		return min(p.RetryInterval, p.ProbeTimeout())
	}
	return p.ProbeTimeout()
}

// Quiet reports whether a periodic probe of a contact in state s, due at
// due, is skipped with qualify_quiet_only, the peer's last final
// response to a call having come at alive; when it is, next is when the
// probe is due instead, F after that response. Only a healthy Reachable
// contact is skipped: a suspect, failing, Unreachable, draining or
// never-qualified one is always probed (qualify-semantics §11.3).
func (p *Policy) Quiet(s State, alive, due time.Time) (next time.Time, skip bool) {
	if !p.QuietOnly || !p.Enabled() || alive.IsZero() || s.Status != Reachable || s.Phase() != Healthy {
		return time.Time{}, false
	}
	next = alive.Add(p.Frequency)
	return next, next.After(due)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
