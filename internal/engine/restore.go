package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// MaxSavedAge is how many qualify_frequency intervals a saved state stays
// good for (measured from its last result, or from Saved.Held when later,
// wall clock): older, it says nothing about the contact now, and Restore
// leaves it NonQualified.
const MaxSavedAge = 10

// Restored counts what Restore did with the states it was given.
type Restored struct {
	// Restored contacts took their saved state.
	Restored int
	// Changed are states of contacts that no longer exist or whose AoR's
	// options changed (the reload rule, qualify-semantics §8).
	Changed int
	// Stale are states older than MaxSavedAge intervals, of qualify-off
	// contacts or contacts another node probes (SetProbed), or without a
	// result.
	Stale int
	// Probed are states of contacts that already have a result of this
	// engine's, which is newer.
	Probed int
}

// Add adds o's counts to r's.
func (r *Restored) Add(o Restored) {
	r.Restored, r.Changed, r.Stale, r.Probed = r.Restored+o.Restored, r.Changed+o.Changed, r.Stale+o.Stale, r.Probed+o.Probed
}

// Restore puts saved states back into the contacts they were taken from,
// with the reload rule (qualify-semantics §8): a contact whose AoR, URI
// and options are unchanged takes its saved status, counters and last
// result; its next probe stays where Apply put it (a first probe, spread
// as max_initial_qualify_time spreads them), or for a contact draining
// until Saved.DrainEnd, at that end (qualify-semantics §11.4). States too old, of contacts
// with qualify off, or of contacts already probed by this engine are left
// out, and so are those of contacts another node probes (SetProbed). Each
// restored status change is published as a StatusChanged from
// NonQualified with the saved result's reason, code and RTT, and each AoR
// that loses its availability as an AvailabilityChanged, at the time of
// the call: subscribers see a restored contact as if its verdict had just
// come.
//
// seal, if set, maps the AoRs' own probe options to the form saved
// states keep them in (a secret replaced by a digest) before the options
// are compared. Restore holds the engine's lock throughout: call it
// before Run.
func (e *Engine) Restore(saved []Saved, seal func(probe.Options) probe.Options) Restored {
	r := restorer{e: e, now: e.cfg.Now(), seal: seal}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range saved {
		r.one(&saved[i])
	}
	return r.n
}

// restorer is one Restore: the counts, and the AoR of the previous saved
// state with its contacts by URI, which the states of its other contacts
// (saved next to each other) reuse.
type restorer struct {
	e    *Engine
	now  time.Time
	seal func(probe.Options) probe.Options
	n    Restored

	a      *aorState
	slots  oldSlots // a's contacts not restored yet
	probe  *probe.Options
	sealed probe.Options // probe, sealed
}

// one restores s if the rule allows. Called with mu held.
func (r *restorer) one(s *Saved) {
	a := r.aor(s.AoR)
	if a == nil || s.Policy == nil || s.Probe == nil || !sameOptions(a.policy, s.Policy, r.sealedOf(a.probe), s.Probe) {
		r.n.Changed++
		return
	}
	id, ok := r.slots.take(s.URI)
	switch {
	case !ok:
		r.n.Changed++
	case r.stale(a.policy, s) || r.e.slots[id].elsewhere:
		r.n.Stale++
	case !r.e.fresh(id):
		r.n.Probed++
	default:
		r.e.restore(id, s, r.now)
		r.n.Restored++
	}
}

// aor returns the AoR named name, nil when it is not configured, and
// indexes its contacts when it is not the previous state's.
func (r *restorer) aor(name string) *aorState {
	if r.a != nil && r.a.name == name {
		return r.a
	}
	r.a = r.e.aors[name]
	r.slots = oldSlots{}
	if r.a != nil {
		r.e.oldSlotsOf(r.a, &r.slots)
	}
	return r.a
}

// sealedOf returns o sealed, sealing each interned options once in a row.
func (r *restorer) sealedOf(o *probe.Options) *probe.Options {
	if r.seal == nil {
		return o
	}
	if o != r.probe {
		r.probe, r.sealed = o, r.seal(*o)
	}
	return &r.sealed
}

// stale reports whether s says nothing about its contact now: qualify is
// off, there is no result, the state is older than MaxSavedAge intervals
// (from its result or, when later, from when it was known to hold), or
// the status is not one a contact keeps.
func (r *restorer) stale(p *qualify.Policy, s *Saved) bool {
	held := s.Last.At
	if s.Held.After(held) {
		held = s.Held
	}
	return !p.Enabled() || s.Last.At.IsZero() || r.now.Sub(held) > MaxSavedAge*p.Frequency ||
		s.State.Status > qualify.Unreachable
}

// fresh reports whether slot id has nothing of its own to lose: no
// result, no probe in flight, and the state of a new contact. Called with
// mu held.
func (e *Engine) fresh(id uint32) bool {
	c := &e.slots[id]
	return c.last.at == 0 && !c.running && c.state == qualify.State{}
}

// restore puts s into slot id at now, publishing the status change and
// the AoR's availability. Called with mu held.
func (e *Engine) restore(id uint32, s *Saved, now time.Time) {
	c := &e.slots[id]
	c.last = lastResult{at: mono(s.Last.At.UnixNano()), rtt: rttMicros(s.RTT), code: int16(s.Last.Code), reason: s.Last.Reason, ok: s.Last.OK, detail: s.Last.Detail}
	c.stats = statsOf(s.Stats)
	step := qualify.Step{State: e.resumeDrain(id, s, now), From: c.state.Status, OK: s.Last.OK, Reason: s.Last.Reason}
	res := qualify.Result{Code: s.Last.Code, Detail: s.Last.Detail}
	if s.Last.OK {
		res.RTT = s.RTT
	}
	var kind EventKind
	if step.Changed() {
		kind = StatusChanged
	}
	e.transition(id, step, kind, res, now)
}

// resumeDrain returns s's state as slot id takes it at now: a drain the
// peer asked for goes on until its end, a wall-clock time, from then on
// on the monotonic clock (the contact's next probe is due at that end);
// a drain that ended while the daemon was down, or saved without its end,
// is over. Policy.Drain bounds the rest by qualify_drain_max, so that a
// clock stepped back meanwhile cannot hold a contact out longer than the
// option allows; stepped forward, the pause ends sooner and a probe
// decides. Called with mu held.
func (e *Engine) resumeDrain(id uint32, s *Saved, now time.Time) qualify.State {
	st := s.State
	if !st.Draining || !s.DrainEnd.After(now) {
		st.Draining = false
		return st
	}
	c := &e.slots[id]
	step := c.policy.Drain(st, now, s.DrainEnd.Sub(now))
	c.until = e.stamp(step.Next)
	e.schedule(id, step.Next)
	return step.State
}
