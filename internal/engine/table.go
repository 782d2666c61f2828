package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// aorState is one applied AoR. Policies and probe options are interned:
// AoRs with equal options share one copy.
type aorState struct {
	name     string
	policy   *qualify.Policy
	probe    *qualify.ProbeOptions
	ids      []uint32 // contact slots, in configuration order
	routable int32    // how many of the contacts are routable
	rank     int32    // its index in Engine.order
}

func (a *aorState) available() bool { return a.routable > 0 }

// contact is one slot of the table. Times are Unix nanoseconds (0: none) to
// keep the slot small; a million contacts live in one slice. next, which
// the schedule and the datagram probes compare with due times, follows
// the monotonic clock from the engine's start (see Engine.unix).
//
// The slot copies what a probe needs of its AoR (name, interned policy and
// options) so that probing does not touch the AoR: past 100,000 contacts
// every slot and AoR is a cache and TLB miss, about 1 us each (issue 7).
// The copies change only with the AoR's options, which renew the slot.
type contact struct {
	aor     *aorState // nil: the slot is free
	uri     string
	name    string                // aor.name
	policy  *qualify.Policy       // aor.policy
	opts    *qualify.ProbeOptions // aor.probe
	state   qualify.State
	zombie  bool // removed while its probe runs; freed when the probe returns
	running bool // a probe is in flight
	// datagram: the probe in flight is timed by the engine (see
	// DatagramProber); proceeding: it had a provisional answer. They fit
	// the slot's padding.
	datagram, proceeding bool

	last lastResult
	next int64 // when the next probe is due
}

// lastResult is the latest applied probe result of a contact.
type lastResult struct {
	at     int64         // when it ended
	rtt    time.Duration // of the last success; kept across failures
	code   int16
	reason qualify.Reason
	ok     bool
	detail string
}

// alloc returns a free slot for a new contact of a. Called with mu held.
func (e *Engine) alloc(a *aorState, uri string) uint32 {
	var id uint32
	if n := len(e.free); n > 0 {
		id = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		id = uint32(len(e.slots))
		e.slots = append(e.slots, contact{})
	}
	e.slots[id] = contact{uri: uri}
	e.slots[id].join(a)
	return id
}

// join makes c a contact of a.
func (c *contact) join(a *aorState) {
	c.aor, c.name, c.policy, c.opts = a, a.name, a.policy, a.probe
}

// release frees slot id. Called with mu held.
func (e *Engine) release(id uint32) {
	e.endDatagram(&e.slots[id])
	e.slots[id] = contact{}
	e.free = append(e.free, id)
}

// routable reports whether the contact in slot id is routable now.
func (e *Engine) routable(id uint32) bool {
	c := &e.slots[id]
	return c.policy.Routable(c.state.Status)
}

// unix returns t as the slots keep it: Unix nanoseconds as of the
// engine's epoch plus the monotonic time since, so that a wall-clock step
// does not move probes (the scheduler runs on the monotonic clock).
func (e *Engine) unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return e.epochUnix + int64(t.Sub(e.epoch))
}

// at is the inverse of unix, with a monotonic reading.
func (e *Engine) at(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return e.epoch.Add(time.Duration(n - e.epochUnix))
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
