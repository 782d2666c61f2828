package sink

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Panic is the daemon's panic state: the count of distinct destinations
// it qualifies, those down, and whether it panics. While it panics every
// sink pushes Up in place of Down, as Envoy routes to every host when too
// few look healthy: a mass outage is more likely qualifyd's own (its
// network, firewall, conntrack table or file descriptors) than every
// router's peers failing at once.
type Panic struct {
	// Active is true while qualifyd panics.
	Active bool
	// Since is when the panic began, or when it last ended; zero before
	// the first.
	Since time.Time
	// Destinations counts the distinct destinations of the qualified
	// contacts (see destination); Down those all of whose contacts are
	// down.
	Destinations, Down int
	// Threshold and MinDestinations are the rule in force.
	Threshold, MinDestinations int
}

// panicRule is the [global] panic rule, defaults applied.
type panicRule struct{ threshold, min int }

// newPanicRule returns p's rule; a zero field takes its default (a file
// cannot set 0).
func newPanicRule(p pjsip.Panic) panicRule {
	r := panicRule{threshold: p.Threshold, min: p.MinDestinations}
	if r.threshold == 0 {
		r.threshold = pjsip.DefaultPanicThreshold
	}
	if r.min == 0 {
		r.min = pjsip.DefaultPanicMinDestinations
	}
	return r
}

// panics reports whether down of size destinations make a panic: more
// than threshold percent of them, and at least min of them qualified.
// Below min nothing tells qualifyd's fault from a real outage. At 100
// it never panics.
func (r panicRule) panics(down, size int) bool {
	return size >= r.min && down*100 > r.threshold*size
}

// contactID names one contact of one AoR.
type contactID struct{ aor, uri string }

// census keeps the count of destinations and of those down, so that the
// panic rule is evaluated in O(1) per status change: per destination the
// count of qualified contacts, and of those down; per contact down its
// destination. A destination is one host and port of the contact URIs
// as hostPort writes it (the kamailio sink's dispatcher destination):
// ten AoRs on one PBX's address count once, two names of one address
// twice. It is down when every qualified contact to it is down (the
// sinks' down: Unreachable and not latency-only). Memory grows with the
// destinations and with the contacts down, not with every contact.
type census struct {
	contacts map[string]int32     // destination -> its qualified contacts
	downs    map[string]int32     // destination -> its contacts down, > 0
	down     map[contactID]string // contact down -> its destination
	out      int                  // destinations all of whose contacts are down
}

// reset counts the qualified contacts of conf, none down.
func (c *census) reset(conf *pjsip.Config) {
	*c = census{contacts: map[string]int32{}, downs: map[string]int32{}, down: map[contactID]string{}}
	for i := range conf.AoRs {
		a := &conf.AoRs[i]
		if p := a.PolicyValue(); !p.Enabled() {
			continue
		}
		for j, uri := range a.Contacts {
			if d, ok := hostPort(uri); ok && !slices.Contains(a.Contacts[:j], uri) {
				c.contacts[d]++
			}
		}
	}
}

// observe takes the levels of a's contacts: O(a's contacts).
func (c *census) observe(a *engine.AoRSnapshot) {
	for i := range a.Contacts {
		ct := &a.Contacts[i]
		id := contactID{a.Name, ct.URI}
		d, was := c.down[id]
		if now := contactLevel(ct) == Down; now == was {
			continue
		} else if now {
			c.markDown(id)
			continue
		}
		delete(c.down, id)
		if c.downs[d] == c.contacts[d] {
			c.out--
		}
		if c.downs[d]--; c.downs[d] == 0 {
			delete(c.downs, d)
		}
	}
}

// markDown counts id down, if it is a qualified contact.
func (c *census) markDown(id contactID) {
	d, ok := hostPort(id.uri)
	if !ok || c.contacts[d] == 0 {
		return
	}
	c.down[id] = d
	if c.downs[d]++; c.downs[d] == c.contacts[d] {
		c.out++
	}
}

// size is the number of destinations.
func (c *census) size() int { return len(c.contacts) }

// panicLine is the log line of entering (or leaving) a panic.
func panicLine(p Panic) (slog.Level, string) {
	share := fmt.Sprintf("%d of %d destinations are down", p.Down, p.Destinations)
	if p.Active {
		return slog.LevelWarn, fmt.Sprintf("panic: %s (more than %d%%), more likely a fault of qualifyd's own: every sink pushes up what it holds down until they are back (panic_threshold)",
			share, p.Threshold)
	}
	return slog.LevelInfo, fmt.Sprintf("panic over: %s (at most %d%%): the sinks push the verdicts again", share, p.Threshold)
}
