package engine

import (
	"sort"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// LastResult is the latest applied probe of a contact.
type LastResult struct {
	// At is when the probe ended; zero if the contact was never probed.
	At time.Time
	// OK and Reason are the verdict; Code the final status code, if any.
	OK     bool
	Reason qualify.Reason
	Code   int
	// Detail explains a failure, when the prober said more.
	Detail string
}

// ContactSnapshot is one contact's state at one instant.
type ContactSnapshot struct {
	AoR, URI string
	Status   qualify.Status
	Routable bool
	Phase    qualify.Phase
	// Failures and Successes are the consecutive counters, out of
	// FailureThreshold (N) and SuccessThreshold (M).
	Failures, Successes                int
	FailureThreshold, SuccessThreshold int
	// RTT is the round-trip time of the latest successful probe.
	RTT  time.Duration
	Last LastResult
	// NextProbe is when the next probe is due; zero if none (qualify off).
	NextProbe time.Time
	// InFlight reports a probe running now.
	InFlight bool
	// LatencyOnly mirrors the AoR's qualify_latency_only.
	LatencyOnly bool
}

// AoRSnapshot is one AoR's state at one instant.
type AoRSnapshot struct {
	Name string
	// Available means at least one contact is routable.
	Available bool
	Contacts  []ContactSnapshot
	// Policy is the AoR's effective qualify policy.
	Policy qualify.Policy
}

// Contacts returns every contact, ordered by AoR name and then
// configuration order, all taken at one instant.
func (e *Engine) Contacts() []ContactSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]ContactSnapshot, 0, len(e.slots)-len(e.free))
	for _, name := range e.sortedNames() {
		for _, id := range e.aors[name].ids {
			out = append(out, e.snapshot(id))
		}
	}
	return out
}

// AoRs returns every AoR ordered by name, all taken at one instant.
func (e *Engine) AoRs() []AoRSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]AoRSnapshot, 0, len(e.aors))
	for _, name := range e.sortedNames() {
		out = append(out, e.aorSnapshot(e.aors[name]))
	}
	return out
}

// AoR returns the named AoR, if it is configured.
func (e *Engine) AoR(name string) (AoRSnapshot, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.aors[name]
	if !ok {
		return AoRSnapshot{}, false
	}
	return e.aorSnapshot(a), true
}

func (e *Engine) sortedNames() []string {
	names := make([]string, 0, len(e.aors))
	for n := range e.aors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (e *Engine) aorSnapshot(a *aorState) AoRSnapshot {
	s := AoRSnapshot{Name: a.name, Available: a.available(), Policy: *a.policy}
	s.Contacts = make([]ContactSnapshot, len(a.ids))
	for i, id := range a.ids {
		s.Contacts[i] = e.snapshot(id)
	}
	return s
}

// snapshot copies slot id. Called with mu held.
func (e *Engine) snapshot(id uint32) ContactSnapshot {
	c := &e.slots[id]
	p := c.aor.policy
	return ContactSnapshot{
		AoR: c.aor.name, URI: c.uri,
		Status: c.state.Status, Routable: p.Routable(c.state.Status), Phase: c.state.Phase(),
		Failures: int(c.state.Failures), Successes: int(c.state.Successes),
		FailureThreshold: p.FailureThreshold(), SuccessThreshold: p.SuccessThreshold(),
		RTT: c.last.rtt,
		Last: LastResult{At: fromUnixNano(c.last.at), OK: c.last.ok, Reason: c.last.reason,
			Code: int(c.last.code), Detail: c.last.detail},
		NextProbe:   fromUnixNano(c.next),
		InFlight:    c.running,
		LatencyOnly: p.LatencyOnly,
	}
}

// Summary is an aggregate of the table, cheap enough for every metrics
// scrape: no per-contact copies.
type Summary struct {
	// ByStatus counts contacts by status (index qualify.Status).
	ByStatus [4]int
	// Routable counts routable contacts.
	Routable int
	// AoRs and AoRsAvailable count the configured AoRs and the available
	// ones.
	AoRs, AoRsAvailable int
}

// Summary returns the aggregate counts at one instant. They are kept up to
// date as probes and reloads change the table, so a metrics scrape does
// not hold the lock that probes need while it walks a million contacts
// (178 ms there: `go test -bench Summary1M ./internal/engine`).
func (e *Engine) Summary() Summary {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sum
	s.AoRs = len(e.aors)
	return s
}
