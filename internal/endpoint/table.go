package endpoint

import (
	"slices"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Snapshot is one endpoint's state at one instant.
type Snapshot struct {
	// Name is the endpoint's section name.
	Name string
	// Available is the routing truth: any of AoRs is available.
	Available bool
	// AoRs are the AoR names of its aors= option, in order.
	AoRs []string
}

// Change is an edge of one endpoint's availability.
type Change struct {
	// Name is the endpoint's.
	Name string
	// Available is the availability after the change.
	Available bool
	// Time is when the change happened (the engine event's time).
	Time time.Time
}

// LogChange is an edge of the log's view of one endpoint (see the package
// doc): the Asterisk line "Endpoint NAME is now Reachable" or
// "... Unreachable".
type LogChange struct {
	// Name is the endpoint's.
	Name string
	// Reachable is the log's view after the change.
	Reachable bool
}

// AoRs is what the table reads of the engine: *engine.Engine.
type AoRs interface {
	AoR(name string) (engine.AoRSnapshot, bool)
}

// Table holds every configured endpoint's availability and log view.
type Table struct {
	aors AoRs

	mu        sync.Mutex
	names     []string            // configured endpoints, sorted
	aorsOf    map[string][]string // endpoint -> its AoRs
	byAoR     map[string][]string // AoR -> endpoints listing it, sorted
	available map[string]bool     // endpoint -> availability
	online    map[string]bool     // endpoint -> log view
	reachable map[string]int      // AoR listed by an endpoint -> contacts in service, counted from events
	down      map[contactKey]bool // latency-only contacts counted in reachable while Unreachable
	always    map[string]bool     // AoRs with qualify off and a contact: online for the log
}

// New returns an empty table reading AoRs from aors.
func New(aors AoRs) *Table {
	return &Table{aors: aors, aorsOf: map[string][]string{}, byAoR: map[string][]string{},
		available: map[string]bool{}, online: map[string]bool{}, reachable: map[string]int{},
		down: map[contactKey]bool{}, always: map[string]bool{}}
}

// contactKey names a contact in the log view's count.
type contactKey struct{ aor, uri string }

// Configure replaces the endpoint list with eps, read after the engine
// applied the matching AoRs. Availability is read from the engine; the log
// view of an endpoint that stays is kept, a new one starts offline, and
// the Reachable contacts of an AoR no endpoint listed before are counted
// from the engine (events were not counted for it). It
// returns the availability changes of the endpoints that stay and the log
// view changes (a new endpoint whose AoR has qualify off goes online, as
// Asterisk prints at start), each in name order.
func (t *Table) Configure(eps []pjsip.Endpoint, at time.Time) ([]Change, []LogChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prevAvail, prevOnline, prevAoRs := t.available, t.online, t.byAoR
	t.names = t.names[:0]
	t.aorsOf, t.byAoR = make(map[string][]string, len(eps)), map[string][]string{}
	t.available, t.online = make(map[string]bool, len(eps)), make(map[string]bool, len(eps))
	t.always = map[string]bool{}
	for _, ep := range eps {
		t.add(ep)
	}
	slices.Sort(t.names)
	up := t.readAoRs(prevAoRs)
	var changes []Change
	var lines []LogChange
	for _, name := range t.names {
		t.available[name] = slices.ContainsFunc(t.aorsOf[name], func(a string) bool { return up[a] })
		if was, ok := prevAvail[name]; ok && was != t.available[name] {
			changes = append(changes, Change{Name: name, Available: t.available[name], Time: at})
		}
		t.online[name] = prevOnline[name]
		lines = t.relog(name, lines)
	}
	return changes, lines
}

// readAoRs reads each listed AoR once from the engine: it returns which
// are available, notes those with qualify off and a contact, counts the
// Reachable contacts of those not listed in prev, and forgets the counts
// of those no longer listed. Called with mu held.
func (t *Table) readAoRs(prev map[string][]string) map[string]bool {
	up := make(map[string]bool, len(t.byAoR))
	for a, eps := range t.byAoR {
		slices.Sort(eps)
		s, ok := t.aors.AoR(a)
		up[a] = ok && s.Available
		t.always[a] = ok && !s.Policy.Enabled() && len(s.Contacts) > 0
		if _, counted := prev[a]; !counted {
			t.count(a, s.Contacts)
		}
	}
	for a, n := range t.reachable {
		if _, listed := t.byAoR[a]; !listed || n == 0 {
			delete(t.reachable, a)
		}
	}
	for k := range t.down {
		if _, listed := t.byAoR[k.aor]; !listed {
			delete(t.down, k)
		}
	}
	return up
}

// add configures one endpoint; a name given twice is listed once, with
// the AoRs of its last definition. Called with mu held.
func (t *Table) add(ep pjsip.Endpoint) {
	if _, dup := t.aorsOf[ep.Name]; !dup {
		t.names = append(t.names, ep.Name)
	}
	t.aorsOf[ep.Name] = ep.AoRs
	for _, a := range ep.AoRs {
		if !slices.Contains(t.byAoR[a], ep.Name) {
			t.byAoR[a] = append(t.byAoR[a], ep.Name)
		}
	}
}

// ContactChanged follows one StatusChanged event in the log's view and
// returns the endpoints whose view it changed, in name order.
func (t *Table) ContactChanged(ev engine.Event) []LogChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byAoR[ev.AoR]) == 0 {
		return nil // no endpoint lists it: not counted
	}
	// A latency-only contact stays in service while Unreachable; whether
	// it was counted so is remembered, as the AoR's option may have
	// changed since (a reload).
	k := contactKey{ev.AoR, ev.URI}
	was := ev.From == qualify.Reachable || (ev.From == qualify.Unreachable && t.down[k])
	now := ev.To == qualify.Reachable || (ev.To == qualify.Unreachable && ev.LatencyOnly)
	if now && ev.To == qualify.Unreachable {
		t.down[k] = true
	} else {
		delete(t.down, k)
	}
	delta := 0
	switch {
	case now && !was:
		delta = 1
	case was && !now:
		delta = -1
	default:
		return nil
	}
	if n := t.reachable[ev.AoR] + delta; n > 0 {
		t.reachable[ev.AoR] = n
	} else {
		delete(t.reachable, ev.AoR)
	}
	var lines []LogChange
	for _, name := range t.byAoR[ev.AoR] {
		lines = t.relog(name, lines)
	}
	return lines
}

// AoRChanged follows one AvailabilityChanged event: it re-reads the
// availability of the endpoints listing the AoR and returns those that
// changed, in name order.
func (t *Table) AoRChanged(ev engine.Event) []Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reread(t.byAoR[ev.AoR], ev.Time, nil)
}

// Resync re-reads every endpoint from the engine, after events were lost:
// availability, and the log view's count of Reachable contacts per AoR.
// It returns the changes of both views, each in name order.
func (t *Table) Resync(at time.Time) ([]Change, []LogChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.reachable)
	clear(t.down)
	for a := range t.byAoR {
		if s, ok := t.aors.AoR(a); ok {
			t.count(a, s.Contacts)
		}
	}
	var lines []LogChange
	for _, name := range t.names {
		lines = t.relog(name, lines)
	}
	return t.reread(t.names, at, nil), lines
}

// count sets the log view's count of AoR a from its contacts cs: those
// in service, Reachable or latency-only Unreachable (as Asterisk's
// persistent endpoint state). Called with mu held.
func (t *Table) count(a string, cs []engine.ContactSnapshot) {
	n := 0
	for i := range cs {
		switch {
		case cs[i].Status == qualify.Reachable:
			n++
		case cs[i].Status == qualify.Unreachable && cs[i].LatencyOnly:
			t.down[contactKey{a, cs[i].URI}] = true
			n++
		}
	}
	t.reachable[a] = n
}

// reread re-reads the availability of names and appends the changes to
// changes. Called with mu held.
func (t *Table) reread(names []string, at time.Time, changes []Change) []Change {
	for _, name := range names {
		now := t.anyAvailable(name)
		if now != t.available[name] {
			t.available[name] = now
			changes = append(changes, Change{Name: name, Available: now, Time: at})
		}
	}
	return changes
}

// relog recomputes the log view of name and appends its change, if any,
// to lines. Called with mu held.
func (t *Table) relog(name string, lines []LogChange) []LogChange {
	now := false
	for _, a := range t.aorsOf[name] {
		if t.reachable[a] > 0 || t.always[a] {
			now = true
			break
		}
	}
	if now == t.online[name] {
		return lines
	}
	t.online[name] = now
	return append(lines, LogChange{Name: name, Reachable: now})
}

// anyAvailable is true when one of name's AoRs is available in the engine
// now; false for an endpoint without an AoR. Called with mu held.
func (t *Table) anyAvailable(name string) bool {
	for _, a := range t.aorsOf[name] {
		if s, ok := t.aors.AoR(a); ok && s.Available {
			return true
		}
	}
	return false
}

// Endpoint returns the named endpoint, if it is configured.
func (t *Table) Endpoint(name string) (Snapshot, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	aors, ok := t.aorsOf[name]
	if !ok {
		return Snapshot{}, false
	}
	return Snapshot{Name: name, Available: t.available[name], AoRs: aors}, true
}

// Page returns at most limit endpoints named after after, in name order,
// appended to buf[:0], and whether more follow.
func (t *Table) Page(buf []Snapshot, after string, limit int) (page []Snapshot, more bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, found := slices.BinarySearch(t.names, after)
	if found {
		i++
	}
	page = buf[:0]
	for ; i < len(t.names) && len(page) < limit; i++ {
		n := t.names[i]
		page = append(page, Snapshot{Name: n, Available: t.available[n], AoRs: t.aorsOf[n]})
	}
	return page, i < len(t.names)
}

// All returns every endpoint, in name order.
func (t *Table) All() []Snapshot {
	page, _ := t.Page(nil, "", int(^uint(0)>>1))
	return page
}
