package sink

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Panic is the daemon's panic state: the count of distinct destinations
// it qualifies, those failing and those down, and whether it panics.
// While it panics the sinks push only ups: what was down when it began
// stays down, nothing new goes down, recoveries are pushed; after it, an
// object that went down meanwhile is pushed down only once a probe made
// after the end confirms it. A mass failure is more likely qualifyd's
// own (its network, firewall, conntrack table or file descriptors) than
// every router's peers failing at once (qualify-semantics §6.1).
type Panic struct {
	// Active is true while qualifyd panics.
	Active bool
	// Since is when the panic began, or when it last ended; zero before
	// the first.
	Since time.Time
	// Destinations counts the distinct destinations of the qualified
	// contacts (see census); Failing those all of whose contacts have
	// failed their latest probe (suspect, from the first failed probe of
	// a run, or down); Down those all of whose contacts are down; Recent
	// those failing whose streak began within the last Hold.
	Destinations, Failing, Down, Recent int
	// Waiting is true while, short of a panic, more than HoldThreshold
	// percent of the destinations are recently failing: a Down that
	// follows an Up is held for at most Hold, in case the share is still
	// climbing to a panic. A destination failing for longer than Hold is
	// known dead (or its Down reached the routers): it does not count.
	Waiting bool
	// Threshold, MinDestinations, HoldThreshold and Hold are the rule in
	// force.
	Threshold, MinDestinations, HoldThreshold int
	Hold                                      time.Duration
	// TakenBack counts, while a panic lasts, the objects whose Down it
	// took back when it began: Downs of its own event, their destinations'
	// streaks all begun within Hold before it. Zero outside a panic.
	TakenBack int
}

// panicRule is the [global] panic rule, defaults applied, and the
// longest a Down waits for a panic (see holdBound).
type panicRule struct {
	threshold, min, hold int
	wait                 time.Duration
}

// newPanicRule returns p's rule; a zero field takes its default (a file
// cannot set 0). The wait is set apart (holdBound).
func newPanicRule(p pjsip.Panic) panicRule {
	r := panicRule{threshold: p.Threshold, min: p.MinDestinations, hold: p.HoldThreshold}
	if r.threshold == 0 {
		r.threshold = pjsip.DefaultPanicThreshold
	}
	if r.min == 0 {
		r.min = pjsip.DefaultPanicMinDestinations
	}
	if r.hold == 0 {
		r.hold = pjsip.DefaultPanicHoldThreshold
	}
	return r
}

// waits reports whether recent of size destinations, those whose
// failing streak began within the wait, are above the lower mark of a
// rule that can panic: more than hold percent of them, at least min
// qualified, and a threshold below 100. A hold mark at or above the
// threshold never waits (evaluate asks short of a panic).
func (r panicRule) waits(recent, size int) bool {
	return r.threshold < 100 && size >= r.min && recent*100 > r.hold*size
}

// holdBound is the longest a Down waits for a panic: the longest F (or
// the down interval, fixed or the backoff's end, when longer) + T (the
// probe's effective deadline: 32 s when qualify_timeout <= 0) of conf's
// qualified AoRs. A blip's failing share climbs from its first failure to a panic within
// panic_threshold% of F, and a contact it took down is probed again
// within F (or D) of its verdict, so a blip's Down recovers or is held
// by the panic within the bound; a genuine Down is pushed when it
// passes.
func holdBound(conf *pjsip.Config) time.Duration {
	var b time.Duration
	for i := range conf.AoRs {
		if p := conf.AoRs[i].PolicyValue(); p.Enabled() {
			b = max(b, max(p.Frequency, p.EffectiveDownInterval())+p.ProbeTimeout())
		}
	}
	return b
}

// panics reports whether failing of size destinations make a panic: more
// than threshold percent of them, and at least min of them qualified.
// Below min nothing tells qualifyd's fault from a real outage. At 100
// it never panics.
func (r panicRule) panics(failing, size int) bool {
	return size >= r.min && failing*100 > r.threshold*size
}

// contactID names one contact of one AoR.
type contactID struct{ aor, uri string }

// health is what the census counts of one contact.
type health uint8

const (
	healthy health = iota
	failing        // its latest probe failed: suspect (or down)
	down           // the sinks' down: Unreachable and not latency-only
)

// healthOf returns c's health. A latency-only contact is never failing:
// its failures never take it out of routing; nor is a draining one.
func healthOf(c *engine.ContactSnapshot) health {
	switch {
	case c.LatencyOnly, c.Phase == qualify.Draining:
		return healthy // a draining peer answered: no failure (qualify-semantics §11.4)
	case contactLevel(c) == Down:
		return down
	case c.Phase == qualify.Suspect:
		return failing
	}
	return healthy
}

// census keeps the count of destinations, of those failing, of those
// recently failing and of those down, so that the panic rule is
// evaluated in O(1) per change: per destination the count of qualified
// contacts, of those failing (down included) and of those down; per
// contact not healthy its destination and health; per destination
// failing when its streak began. A destination is one host and port of
// the contact URIs as hostPort writes it (the kamailio sink's dispatcher
// destination): ten AoRs on one PBX's address count once, two names of
// one address twice. It is failing (down) when every qualified contact
// to it is. Memory grows with the destinations, with the contacts not
// healthy and with the streaks begun within the wait, not with every
// contact.
type census struct {
	contacts map[string]int32      // destination -> its qualified contacts
	fails    map[string]int32      // destination -> its contacts failing or down, > 0
	downs    map[string]int32      // destination -> its contacts down, > 0
	sick     map[contactID]sickOne // contact not healthy -> its destination, health
	since    map[string]streak     // destination failing -> its streak
	prior    map[string]streak     // since before recount, while it counts again
	begun    []begun               // the recent streaks' beginnings, oldest first (some ended)
	failing  int                   // destinations all of whose contacts fail
	recent   int                   // of those, the ones whose streak is recent
	out      int                   // destinations all of whose contacts are down
}

// sickOne is a contact not healthy: its destination and health.
type sickOne struct {
	dest string
	h    health
}

// streak is when a destination began failing, and whether that was
// within the wait (age has not yet aged it out).
type streak struct {
	at     time.Time
	recent bool
}

// begun is the beginning of destination dest's streak at at.
type begun struct {
	at   time.Time
	dest string
}

// reset counts the qualified contacts of conf, all healthy.
func (c *census) reset(conf *pjsip.Config) {
	*c = census{contacts: map[string]int32{}, fails: map[string]int32{}, downs: map[string]int32{},
		sick: map[contactID]sickOne{}, since: map[string]streak{}}
	for i := range conf.AoRs {
		a := &conf.AoRs[i]
		if p := a.PolicyValue(); !p.Enabled() {
			continue
		}
		for _, d := range destinations(a) {
			c.contacts[d]++
		}
	}
}

// destinations returns the destination of each contact of a, a contact
// given twice once.
func destinations(a *pjsip.AoR) []string {
	var out []string
	for j, uri := range a.Contacts {
		if d, ok := hostPort(uri); ok && !slices.Contains(a.Contacts[:j], uri) {
			out = append(out, d)
		}
	}
	return out
}

// recount counts conf's qualified contacts again and observes each
// AoR aor returns at now: a destination still failing keeps the streak
// it had (a reload or a resync starts none), one failing anew begins
// one at now.
func (c *census) recount(conf *pjsip.Config, aor func(name string) (engine.AoRSnapshot, bool), now time.Time) {
	since, begun := c.since, c.begun
	c.reset(conf)
	c.prior, c.begun = since, begun
	for i := range conf.AoRs {
		if p := conf.AoRs[i].PolicyValue(); p.Enabled() {
			if a, ok := aor(conf.AoRs[i].Name); ok {
				c.observe(&a, now)
			}
		}
	}
	c.prior = nil
}

// observe takes the health of a's contacts at now: O(a's contacts).
func (c *census) observe(a *engine.AoRSnapshot, now time.Time) {
	for i := range a.Contacts {
		ct := &a.Contacts[i]
		id := contactID{a.Name, ct.URI}
		was, ok := c.sick[id]
		h := healthOf(ct)
		if ok && was.h == h || !ok && h == healthy {
			continue
		}
		if ok && h != healthy {
			c.relevel(was.dest, was.h, h)
			c.sick[id] = sickOne{was.dest, h}
			continue
		}
		if ok {
			c.move(was.dest, was.h, -1, now)
			delete(c.sick, id)
		}
		if d, q := hostPort(id.uri); h != healthy && q && c.contacts[d] > 0 {
			c.sick[id] = sickOne{d, h}
			c.move(d, h, 1, now)
		}
	}
}

// move adds sign to destination d's count of contacts of health h
// (failing or down) at now, and keeps the destinations' counts and
// streaks.
func (c *census) move(d string, h health, sign int32, now time.Time) {
	failing := c.failing
	c.fails[d] = c.shift(c.fails, d, sign, &c.failing)
	switch {
	case c.failing > failing:
		c.begin(d, now)
	case c.failing < failing:
		c.end(d)
	}
	if h == down {
		c.downs[d] = c.shift(c.downs, d, sign, &c.out)
	}
	if c.fails[d] == 0 {
		delete(c.fails, d)
	}
	if c.downs[d] == 0 {
		delete(c.downs, d)
	}
}

// relevel moves one contact of destination d from health from to to,
// both not healthy (failing to down, or back): its streak goes on, only
// the count of contacts down changes.
func (c *census) relevel(d string, from, to health) {
	if from == down {
		if c.downs[d] = c.shift(c.downs, d, -1, &c.out); c.downs[d] == 0 {
			delete(c.downs, d)
		}
	}
	if to == down {
		c.downs[d] = c.shift(c.downs, d, 1, &c.out)
	}
}

// begin starts d's streak at now, recent; or, while recount counts
// again, carries the one d had.
func (c *census) begin(d string, now time.Time) {
	s, ok := c.prior[d]
	if !ok {
		s = streak{at: now, recent: true}
		c.begun = append(c.begun, begun{now, d})
	}
	c.since[d] = s
	if s.recent {
		c.recent++
	}
}

// end ends d's streak: it is healthy again.
func (c *census) end(d string) {
	if c.since[d].recent {
		c.recent--
	}
	delete(c.since, d)
}

// age ages out of the recent count every streak begun wait or longer
// before now: O(1) amortized per streak. A beginning whose streak has
// ended (or, after a recovery, begun again later) counts nothing.
func (c *census) age(now time.Time, wait time.Duration) {
	for len(c.begun) > 0 && now.Sub(c.begun[0].at) >= wait {
		b := c.begun[0]
		c.begun[0] = begun{}
		c.begun = c.begun[1:]
		if s, ok := c.since[b.dest]; ok && s.recent && s.at.Equal(b.at) {
			c.since[b.dest] = streak{at: s.at}
			c.recent--
		}
	}
}

// shift returns m[d] + sign and moves *all, the destinations all of whose
// contacts m counts, when d enters or leaves it.
func (c *census) shift(m map[string]int32, d string, sign int32, all *int) int32 {
	n, full := m[d]+sign, c.contacts[d]
	switch {
	case n == full && sign > 0:
		*all++
	case n == full-1 && sign < 0:
		*all--
	}
	return n
}

// size is the number of destinations.
func (c *census) size() int { return len(c.contacts) }

// panicLine is the log line of entering (or leaving) a panic.
func panicLine(p Panic) (slog.Level, string) {
	share := fmt.Sprintf("%d of %d destinations are failing (%d down)", p.Failing, p.Destinations, p.Down)
	if p.Active {
		line := fmt.Sprintf("panic: %s (more than %d%%), more likely a fault of qualifyd's own: the sinks push only ups until they are back (panic_threshold)",
			share, p.Threshold)
		if p.TakenBack > 0 {
			line += fmt.Sprintf("; %d downs of this event taken back (their streaks began within %v)", p.TakenBack, p.Hold)
		}
		return slog.LevelWarn, line
	}
	return slog.LevelInfo, fmt.Sprintf("panic over: %s (at most %d%%): the sinks push the verdicts again, a down held in the panic once a new probe confirms it", share, p.Threshold)
}
