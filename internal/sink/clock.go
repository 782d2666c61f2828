package sink

import "time"

// Clock is where the sinks read the time. Wall is the wall clock: the
// times that leave qualifyd (a webhook's change time) and those the
// source's snapshots give (a probe's end) are on it; the daemon gives
// the engine's (engine.Engine.Now), which does not step, and a Wall that
// steps (chrony at boot, a VM resumed) is compared right with a probe's
// end read after the step. Mono is read only for spans, the
// panic's holds and deadlines, and its readings are compared only with
// each other: it must not step. A nil field is time.Now, whose monotonic
// reading Go's Sub, Before and After use when both sides carry one.
type Clock struct {
	Wall, Mono func() time.Time
}

// clock is a Clock with defaults and the Mono reading the objects' times
// count from, shared by a group's reconcilers so that their objects move
// between them.
type clock struct {
	wallNow, monoNow func() time.Time
	epoch            time.Time // a Mono reading
}

// newClock returns c with its defaults, its epoch now.
func newClock(c Clock) *clock {
	k := &clock{wallNow: c.Wall, monoNow: c.Mono}
	if k.wallNow == nil {
		k.wallNow = time.Now
	}
	if k.monoNow == nil {
		k.monoNow = time.Now
	}
	k.epoch = k.monoNow()
	return k
}

// wall reads the wall clock.
func (c *clock) wall() time.Time { return c.wallNow() }

// mono returns the time elapsed since the epoch on Mono, in nanoseconds:
// what the holds compare. It never steps back.
func (c *clock) mono() int64 { return int64(c.monoNow().Sub(c.epoch)) }

// wallOf returns the wall time of the mono reading at, in Wall's present
// terms: now less the span since at, so that a step of the wall clock
// between then and now moves it with the clock.
func (c *clock) wallOf(at int64) time.Time {
	return c.wall().Add(-time.Duration(c.mono() - at))
}
