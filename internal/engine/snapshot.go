package engine

import (
	"slices"
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
	// NextProbe is when the next probe is due; zero if none (qualify
	// off). While InFlight, it is when the probe in flight started.
	NextProbe time.Time
	// InFlight reports a probe running now.
	InFlight bool
	// LatencyOnly mirrors the AoR's qualify_latency_only.
	LatencyOnly bool
	// Elsewhere reports a contact this engine does not probe (SetProbed):
	// another node does, and its Status here is NonQualified.
	Elsewhere bool
	// Stats are the contact's running statistics.
	Stats Stats
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
// configuration order. It takes them a page at a time (see ContactsPage):
// each AoR is taken at one instant, but the table is not.
func (e *Engine) Contacts() []ContactSnapshot {
	out := make([]ContactSnapshot, 0, e.Summary().contacts())
	var page []ContactSnapshot
	for after, more := "", true; more; {
		page, more = e.ContactsPage(page, after, listPage)
		out = append(out, page...)
		if more {
			after = page[len(page)-1].AoR
		}
	}
	return out
}

// AoRs returns every AoR ordered by name. It takes them a page at a time
// (see AoRsPage): each AoR is taken at one instant, but the table is not.
func (e *Engine) AoRs() []AoRSnapshot {
	out := make([]AoRSnapshot, 0, e.Summary().AoRs)
	for after, more := "", true; more; {
		var page []AoRSnapshot
		page, more = e.AoRsPage(nil, after, listPage)
		out = append(out, page...)
		if more {
			after = page[len(page)-1].Name
		}
	}
	return out
}

// ContactsPage returns the contacts of the AoRs named after after (in
// byte order; "" starts at the first), ordered by AoR name and then
// configuration order: whole AoRs, at most limit contacts (at least 1),
// or all of the first AoR's when it alone has more. AoRs without contacts
// add nothing. more reports AoRs after the page; the next page starts
// after the AoR of the page's last contact. after need not name an AoR
// still configured.
//
// The page is taken at one instant, holding the engine's lock only for
// it, so that listing a million contacts page by page never stops the
// probes for long; a reload between two pages shows in the later one,
// and no AoR is listed twice. The page is appended to buf[:0]: a caller
// listing page by page can pass the previous page back and allocate
// nothing more. buf may be nil.
func (e *Engine) ContactsPage(buf []ContactSnapshot, after string, limit int) (page []ContactSnapshot, more bool) {
	return pageOf(e, buf, after, limit, e.snapshot)
}

// pageOf is a page of ContactsPage's, with each contact copied by take
// (called with mu held) instead of snapshot.
func pageOf[T any](e *Engine, buf []T, after string, limit int, take func(id uint32) T) (page []T, more bool) {
	limit = max(limit, 1)
	page = slices.Grow(buf[:0], min(limit, listPage))
	e.mu.Lock()
	defer e.mu.Unlock()
	i := e.seek(after)
	for ; i < len(e.order); i++ {
		a := e.order[i]
		if len(page) > 0 && len(page)+len(a.ids) > limit {
			break
		}
		for _, id := range a.ids {
			page = append(page, take(id))
		}
	}
	return page, i < len(e.order)
}

// AoRsPage returns the AoRs named after after (in byte order; "" starts
// at the first), ordered by name: as many as hold at most limit contacts
// (at least 1; an AoR without contacts counts as one), or only the first
// when it alone has more. more reports AoRs after the page; the next page
// starts after its last AoR. after need not name an AoR still configured.
// The page is taken at one instant, as ContactsPage's, and appended to
// buf[:0], reusing buf's AoRs' Contacts arrays too. buf may be nil.
func (e *Engine) AoRsPage(buf []AoRSnapshot, after string, limit int) (page []AoRSnapshot, more bool) {
	limit = max(limit, 1)
	page = buf[:0]
	e.mu.Lock()
	defer e.mu.Unlock()
	i, n := e.seek(after), 0
	for ; i < len(e.order); i++ {
		a := e.order[i]
		size := max(len(a.ids), 1)
		if len(page) > 0 && n+size > limit {
			break
		}
		page = slices.Grow(page, 1)[:len(page)+1]
		e.aorSnapshotTo(&page[len(page)-1], a)
		n += size
	}
	return page, i < len(e.order)
}

// listPage is how many contacts Contacts and AoRs copy per hold of the
// engine's lock, and the most room ContactsPage allocates before it takes
// the lock, whatever limit its caller asks for.
const listPage = 1024

// seek returns the index in order of the first AoR named after after.
// Called with mu held.
func (e *Engine) seek(after string) int {
	i, _ := slices.BinarySearchFunc(e.order, after, func(a *aorState, name string) int {
		if a.name <= name {
			return -1
		}
		return 1
	})
	return i
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

func (e *Engine) aorSnapshot(a *aorState) AoRSnapshot {
	var s AoRSnapshot
	e.aorSnapshotTo(&s, a)
	return s
}

// aorSnapshotTo copies a into s, reusing s.Contacts' array when it has
// room. Called with mu held.
func (e *Engine) aorSnapshotTo(s *AoRSnapshot, a *aorState) {
	cs := s.Contacts[:0]
	if cap(cs) < len(a.ids) {
		cs = make([]ContactSnapshot, 0, len(a.ids))
	}
	*s = AoRSnapshot{Name: a.name, Available: a.available(), Policy: *a.policy}
	for _, id := range a.ids {
		cs = append(cs, e.snapshot(id))
	}
	s.Contacts = cs
}

// snapshot copies slot id. Called with mu held.
func (e *Engine) snapshot(id uint32) ContactSnapshot {
	c := &e.slots[id]
	p := c.aor.policy
	next := c.due()
	if c.running {
		next = c.started()
	}
	return ContactSnapshot{
		AoR: c.aor.name, URI: c.uri,
		Status: c.state.Status, Routable: p.RoutableState(c.state), Phase: c.state.Phase(),
		Failures: int(c.state.Failures), Successes: int(c.state.Successes),
		FailureThreshold: p.FailureThresholdFor(c.state), SuccessThreshold: p.SuccessThreshold(),
		RTT: c.last.RTT(), Last: c.last.public(),
		NextProbe:   next.wall(),
		InFlight:    c.running,
		LatencyOnly: p.LatencyOnly,
		Elsewhere:   c.elsewhere,
		Stats:       c.stats.public(),
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
	// Elsewhere counts the contacts this engine does not probe: another
	// node does (SetProbed).
	Elsewhere int
	// Draining counts the contacts whose peer asked for a pause (a 503
	// with Retry-After), out of routing until it ends.
	Draining int
	// AoRsDrainHeld counts the AoRs unavailable while a contact of theirs
	// drains: out of routing at a peer's request, not for a failure.
	AoRsDrainHeld int
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

// Probed returns how many contacts the engine probes: every contact but
// those Elsewhere.
func (s Summary) Probed() int { return s.contacts() - s.Elsewhere }

// contacts returns how many contacts s counts.
func (s Summary) contacts() int {
	n := 0
	for _, k := range s.ByStatus {
		n += k
	}
	return n
}
