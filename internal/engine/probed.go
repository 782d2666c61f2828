package engine

import (
	"errors"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Probed reports whether this engine probes the contact uri of the AoR
// named aor: a cluster node probes only the contacts it is a vantage of.
// It must answer alike for a contact until the next SetProbed.
type Probed func(aor, uri string) bool

// ErrElsewhere is the Err of a manual qualify of a contact this engine
// does not probe (SetProbed): another node does.
var ErrElsewhere = errors.New("contact not probed here (another node is its vantage)")

// SetProbed makes probed the test of which contacts this engine probes
// and applies it to every configured contact now; Apply applies it to
// each contact it adds or renews. nil probes every contact, as before
// the first call. Every contact stays in the table (snapshots list it),
// but one the test takes off is not scheduled: it changes to
// NonQualified (a StatusChanged unless it was NonQualified) with its
// counters cleared, a probe of it in flight is not applied, and a manual
// qualify waiting for it reports ErrElsewhere; its last result and
// statistics stay. A contact the test puts back is scheduled as a new
// contact: its first probe is delayed at random within min(F,
// max_initial_qualify_time) (qualify-semantics §7). The others keep their
// state and schedule. moved, if set, is told of each contact about to
// move, before the move: before any result of a contact put back, and
// before the StatusChanged of one taken off. It returns how many contacts this engine probes now
// (of qualify-off AoRs too; see Summary.Elsewhere).
//
// probed and moved are called without the engine's lock, one contact at
// a time: probed during SetProbed and Apply only, moved during SetProbed.
func (e *Engine) SetProbed(probed Probed, moved Moved) int {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	e.probed = probed
	flips := e.flips(probed)
	if moved != nil {
		for _, f := range flips {
			moved(f.aor.name, e.slots[f.id].uri, f.here)
		}
	}
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range flips {
		if f.here {
			e.probeHere(f.id, now)
		} else {
			e.probeElsewhere(f.id, now)
		}
	}
	return e.sum.Probed()
}

// Moved is told of each contact a SetProbed is about to move: here, when
// this engine probes it from then on, or not.
type Moved func(aor, uri string, here bool)

// flip is a contact that SetProbed moves: of aor, in slot id, to here.
type flip struct {
	aor  *aorState
	id   uint32
	here bool
}

// flips returns the contacts whose answer of probed differs from their
// flag. It reads the AoRs, their ids and the slots' URIs and flags
// without mu: only Apply and SetProbed change them, and the caller holds
// applyMu.
func (e *Engine) flips(probed Probed) []flip {
	var out []flip
	for _, a := range e.order {
		for _, id := range a.ids {
			c := &e.slots[id]
			if here := probed == nil || probed(a.name, c.uri); here == c.elsewhere {
				out = append(out, flip{a, id, here})
			}
		}
	}
	return out
}

// elsewhere returns, by contact of aors (AoR after AoR), whether another
// node probes it; nil when every contact is probed here. It runs the
// Probed test without mu; the caller holds applyMu.
func (e *Engine) elsewhere(aors defs, total int) []bool {
	if e.probed == nil {
		return nil
	}
	out := make([]bool, 0, total)
	for i := range aors.n {
		a := aors.at(i)
		for _, u := range a.Contacts {
			out = append(out, !e.probed(a.Name, u))
		}
	}
	return out
}

// probeElsewhere takes slot id off probing: out of the schedule (a probe
// in flight finishes unapplied), its waiters answered with ErrElsewhere,
// its status reset to NonQualified. Called with mu held.
func (e *Engine) probeElsewhere(id uint32, now time.Time) {
	c := &e.slots[id]
	c.elsewhere = true
	e.sum.Elsewhere++
	e.dismiss(id, ErrElsewhere)
	if !c.running {
		e.sched.Remove(id)
		c.wait(0)
	}
	step := qualify.Step{From: c.state.Status}
	var kind EventKind
	if step.Changed() {
		kind = StatusChanged
	}
	e.transition(id, step, kind, qualify.Result{}, now)
}

// probeHere puts slot id back on probing, its first probe delayed as a
// new contact's; a probe still in flight schedules the next itself.
// Called with mu held.
func (e *Engine) probeHere(id uint32, now time.Time) {
	c := &e.slots[id]
	c.elsewhere = false
	e.sum.Elsewhere--
	if !c.running && c.policy.Enabled() {
		e.schedule(id, now.Add(c.policy.FirstDelay(e.cfg.MaxInitialQualifyTime, e.cfg.Rand())))
	}
}

// awayAt reports whether the k-th contact of away, flags that elsewhere
// returned, is probed elsewhere (nil: none is).
func awayAt(away []bool, k int) bool { return away != nil && away[k] }
