package engine

import (
	"context"
	"time"
)

// Driver runs an Engine in the caller's time instead of Run's timer: a
// discrete-event simulator asks when the next probe is due, sets the
// engine's clock (Config.Now) there and starts the due probes. Each probe
// runs the one way it runs under Run: the scheduler's job starts it with
// Config.Prober's Start, and the prober's done applies the result (called
// by the simulator with the clock at the probe's end). Run must not be
// called. Not safe for concurrent use; the engine's other methods are.
type Driver struct{ e *Engine }

// Drive returns a Driver of e, which stands in for Run: ctx is passed to
// the probes, and results that arrive once it is cancelled are not
// applied.
func (e *Engine) Drive(ctx context.Context) *Driver {
	e.runCtx = ctx
	return &Driver{e: e}
}

// Next returns when the earliest waiting probe is due; false when none is.
func (d *Driver) Next() (time.Time, bool) { return d.e.sched.Next() }

// StartDue starts every probe due at Config.Now, in due order, as Run's
// loop would: a probe of a contact removed meanwhile is dropped, and
// Config.Lateness sees how late each one starts.
func (d *Driver) StartDue() { d.e.sched.StartDue(d.e.runCtx) }
