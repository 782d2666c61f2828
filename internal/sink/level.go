package sink

import (
	"strconv"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Level is what qualifyd wants a router to hold for one object. The zero
// value is Unknown.
type Level uint8

const (
	// Unknown: no verdict yet (every contact the object depends on is
	// NonQualified); nothing is pushed.
	Unknown Level = iota
	// Up: the object may carry calls.
	Up
	// Down: none of the object's contacts is routable.
	Down
)

var levelLabels = [...]string{"unknown", "up", "down"}

// String returns the level's lower-case name, as in the webhook's
// payload.
func (l Level) String() string {
	if int(l) < len(levelLabels) {
		return levelLabels[l]
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}

// Kind says what an object of a router stands for.
type Kind uint8

const (
	// KindContact is one contact of an AoR (Key.Name is the AoR, Key.URI
	// the contact).
	KindContact Kind = iota + 1
	// KindAoR is an AoR (Key.Name).
	KindAoR
	// KindEndpoint is an endpoint (Key.Name), over the AoRs it lists that
	// the sink follows.
	KindEndpoint
	// KindHost is every contact with one host and port (Key.Name, as
	// hostPort returns it), as a dispatcher destination.
	KindHost
	// KindDevice is an Asterisk device named after an endpoint, or after
	// an AoR that no endpoint lists (Key.Name, without the prefix): one
	// object per name, over every AoR behind it.
	KindDevice
)

var kindLabels = [...]string{"", "contact", "aor", "endpoint", "host", "device"}

// String returns the kind's name, as in the webhook's payload.
func (k Kind) String() string {
	if int(k) < len(kindLabels) && k > 0 {
		return kindLabels[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Key names one object of a router.
type Key struct {
	Kind Kind
	// Name is the AoR, endpoint or host:port.
	Name string
	// URI is the contact's, for KindContact only.
	URI string
}

// contactLevel is one contact's level: Down when Unreachable or draining
// and not latency-only, Unknown while NonQualified, else Up
// (docs/qualify-semantics.md §6, §11.4).
func contactLevel(c *engine.ContactSnapshot) Level {
	switch {
	case (c.Status == qualify.Unreachable || c.Phase == qualify.Draining) && !c.LatencyOnly:
		return Down
	case c.Status == qualify.NonQualified:
		return Unknown
	}
	return Up
}

// aggregate folds contact levels: Unknown while every contact is
// Unknown (or there is none), else Down when none is routable, else Up.
// An Unknown contact is routable (NonQualified carries calls), so it
// makes a judged aggregate Up.
type aggregate struct {
	judged, routable bool
}

// add counts one contact.
func (a *aggregate) add(c *engine.ContactSnapshot) {
	l := contactLevel(c)
	a.judged = a.judged || l != Unknown
	a.routable = a.routable || l != Down
}

// level is the folded level.
func (a aggregate) level() Level {
	switch {
	case !a.judged:
		return Unknown
	case a.routable:
		return Up
	}
	return Down
}

// HostPort returns the host and port a SIP URI is sent to, as the
// kamailio sink matches destinations to contacts: observe.HostPort.
func HostPort(uri string) (string, bool) { return observe.HostPort(uri) }

// hostPort is observe.HostPort.
func hostPort(uri string) (string, bool) { return observe.HostPort(uri) }
