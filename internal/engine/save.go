package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Saved is one contact's state as SavedPage takes it and Restore puts it
// back: the contact, its AoR's options (which the reload rule compares,
// qualify-semantics §8), its status and counters, and its last result.
type Saved struct {
	AoR, URI string
	// Policy and Probe are the AoR's options when the state was taken,
	// shared by the contacts of AoRs with equal options: never modify
	// them through a Saved.
	Policy *qualify.Policy
	Probe  *probe.Options
	// State is the status and the consecutive counters; its phase follows
	// from them.
	State qualify.State
	// Last is the latest applied probe (zero At: none); RTT is that of
	// the latest success.
	Last LastResult
	RTT  time.Duration
	// Stats are the contact's running statistics.
	Stats Stats
	// DrainEnd, while State.Draining, is when the pause the peer asked
	// for ends (qualify-semantics §11.4), in the engine's time as Last.At;
	// zero otherwise. Restore resumes the pause until then.
	DrainEnd time.Time
	// Held, when later than Last.At, is a later time the state is known
	// to have held: the state file's last write or check. Restore measures
	// a state's age from the later of the two.
	Held time.Time
}

// SavedPage returns the state of the contacts of the AoRs named after
// after, paged as ContactsPage's and taken at one instant, holding the
// engine's lock only for the page, so that saving a million contacts page
// by page never stops the probes for long. A caller saving the table
// passes the previous page back as buf and allocates nothing more: the
// strings and options are the engine's own, immutable ones.
func (e *Engine) SavedPage(buf []Saved, after string, limit int) (page []Saved, more bool) {
	return pageOf(e, buf, after, limit, e.saved)
}

// saved copies the state of slot id. Called with mu held.
func (e *Engine) saved(id uint32) Saved {
	c := &e.slots[id]
	s := Saved{
		AoR: c.name, URI: c.uri, Policy: c.policy, Probe: c.opts, State: c.state,
		Last: c.last.public(), RTT: c.last.RTT(), Stats: c.stats.public(),
	}
	if c.state.Draining {
		s.DrainEnd = e.timeOf(c.until).Round(0)
	}
	return s
}
