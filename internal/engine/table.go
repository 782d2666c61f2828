package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// aorState is one applied AoR. Policies and probe options are interned:
// AoRs with equal options share one copy.
type aorState struct {
	name     string
	policy   *qualify.Policy
	probe    *probe.Options
	ids      []uint32 // contact slots, in configuration order
	routable int32    // how many of the contacts are routable
	draining int32    // how many of the contacts are draining
	rank     int32    // its index in Engine.order
	hist     *history // nil unless the AoR is one of Config.HistoryAoRs
}

func (a *aorState) available() bool { return a.routable > 0 }

// drainHeld reports whether a is unavailable while a contact of it
// drains: out of routing at its peer's request (qualify-semantics
// §11.4), not for a failure.
func (a *aorState) drainHeld() bool { return !a.available() && a.draining > 0 }

// contact is one slot of the table: 192 bytes (TestSlotSize), a million
// of them in one slice. Its times are mono values, 0 for none.
//
// The slot copies what a probe needs of its AoR (name, interned policy and
// options) so that probing does not touch the AoR: past 100,000 contacts
// every slot and AoR is a cache and TLB miss, about 1 us each. The copies
// change only with the AoR's options, which renew the slot.
type contact struct {
	aor     *aorState // nil: the slot is free
	uri     string
	name    string          // aor.name
	policy  *qualify.Policy // aor.policy
	opts    *probe.Options  // aor.probe
	state   qualify.State
	zombie  bool // removed while its probe runs; freed when the probe returns
	running bool // a probe is in flight
	hist    bool // aor.hist != nil: its probes go to the AoR's history
	// elsewhere: the engine's Probed test says another node probes it
	// (SetProbed): it is not scheduled and stays NonQualified.
	elsewhere bool
	// urgent: the next probe was brought forward by a call that indicts
	// the peer (Pull), so it is neither skipped as quiet nor brought
	// forward again until it starts.
	urgent bool

	last  lastResult
	stats stats
	// when is the slot's one time, which running says the meaning of:
	// idle, when the next probe is due; running, when the probe in flight
	// started. Read it with due and started, set it with wait and begin.
	when mono
	// alive is when the peer last gave a final response to a call that
	// does not indict it (qualify_quiet_only); until is when its drain
	// ends while the state is Draining. 0 for none.
	alive, until mono
}

// due returns when c's next probe is due: 0 when none is, or while a
// probe is in flight.
func (c *contact) due() mono {
	if c.running {
		return 0
	}
	return c.when
}

// started returns when c's probe in flight started; 0 when none is.
func (c *contact) started() mono {
	if !c.running {
		return 0
	}
	return c.when
}

// begin marks c's probe, started at start, in flight.
func (c *contact) begin(start mono) { c.running, c.when = true, start }

// wait marks c idle, its next probe due at due (0: none).
func (c *contact) wait(due mono) { c.running, c.when = false, due }

// lastResult is the latest applied probe result of a contact.
type lastResult struct {
	at     mono   // when it ended, on the engine's clock (a restored one: the state file's time)
	rtt    uint32 // of the last success, in microseconds; kept across failures
	code   int16
	reason qualify.Reason
	ok     bool
	detail string
}

// rttMicros returns d in whole microseconds, as a slot keeps an RTT: RTTs
// are shown and saved in microseconds.
func rttMicros(d time.Duration) uint32 { return uint32(max(min(d, maxStatRTT), 0) / time.Microsecond) }

// RTT returns the last success's RTT.
func (l *lastResult) RTT() time.Duration { return micros(l.rtt) }

// public returns l as snapshots show it.
func (l *lastResult) public() LastResult {
	return LastResult{At: l.at.wall(), OK: l.ok, Reason: l.reason, Code: int(l.code), Detail: l.detail}
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
	c.aor, c.name, c.policy, c.opts, c.hist = a, a.name, a.policy, a.probe, a.hist != nil
}

// release frees slot id. Called with mu held.
func (e *Engine) release(id uint32) {
	e.slots[id] = contact{}
	e.free = append(e.free, id)
}

// routable reports whether the contact in slot id is routable now.
func (e *Engine) routable(id uint32) bool {
	c := &e.slots[id]
	return c.policy.RoutableState(c.state)
}

// mono is a time as the slots keep it, in 8 bytes: the Unix nanoseconds
// of the engine's epoch plus the monotonic time since, so that a
// wall-clock step does not move probes (the scheduler runs on the
// monotonic clock). 0 is none.
type mono int64

// stamp returns t as a mono value.
func (e *Engine) stamp(t time.Time) mono {
	if t.IsZero() {
		return 0
	}
	return mono(e.epochUnix + int64(t.Sub(e.epoch)))
}

// timeOf is the inverse of stamp, with a monotonic reading: a time to
// compare with Config.Now's.
func (e *Engine) timeOf(m mono) time.Time {
	if m == 0 {
		return time.Time{}
	}
	return e.epoch.Add(time.Duration(int64(m) - e.epochUnix))
}

// Now returns the engine's time now, as its snapshots give times (a
// probe's end, ContactSnapshot.Last.At): the wall clock's reading when
// the engine was made plus the monotonic time since, in UTC. A step of
// the system clock moves neither it nor them.
func (e *Engine) Now() time.Time { return e.stamp(e.cfg.Now()).wall() }

// wall returns m as a wall-clock time in UTC, for snapshots and events.
func (m mono) wall() time.Time { return fromUnixNano(int64(m)) }

// fromUnixNano returns the UTC time of n Unix nanoseconds; zero for 0.
func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
