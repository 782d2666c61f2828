// Package observe is what qualifyd hears of the routers' calls: the
// Observation of one call attempt's outcome towards a destination it
// qualifies, the Sink the daemon takes them through, and the JSON body of
// POST /api/v1/observations with its bounds. A call's outcome never makes
// a contact Unreachable by itself: it makes a contact suspect (probe now),
// proves a peer alive (the quiet-trunk option skips its OPTIONS), or puts
// a draining peer out of routing for the time it asked
// (docs/qualify-semantics.md, "Calls as evidence").
//
// The package is pure and imports only the standard library, so that the
// engine, the sinks and the sources all share it.
package observe

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Outcome is how one call attempt towards a destination ended. The zero
// value is invalid.
type Outcome uint8

const (
	// Answered: the peer answered the call with a 2xx final response.
	Answered Outcome = iota + 1
	// Failed: the peer sent a final response other than a 2xx (Code says
	// which, 300 to 699). A response the router made up itself (a local
	// 408 or 503 after its own timeout) is Timeout or Transport, never
	// Failed: Failed means the peer spoke.
	Failed
	// Timeout: the INVITE transaction timed out without a final response
	// (Timer B in Asterisk, fr_timer in Kamailio).
	Timeout
	// Transport: the transport failed before a final response: a refused
	// or reset connection, a TLS failure, a send error.
	Transport
)

// NumOutcomes is the number of outcomes plus one (the invalid zero): the
// length of an array indexed by Outcome.
const NumOutcomes = int(Transport) + 1

var outcomeLabels = [...]string{"", "answered", "failed", "timeout", "transport"}

// String returns the outcome's name as the JSON body and the metrics'
// outcome label spell it.
func (o Outcome) String() string {
	if int(o) < len(outcomeLabels) && o > 0 {
		return outcomeLabels[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// ParseOutcome returns the Outcome named s.
func ParseOutcome(s string) (Outcome, bool) {
	for i, l := range outcomeLabels {
		if i > 0 && l == s {
			return Outcome(i), true
		}
	}
	return 0, false
}

// Source is who reported an observation. The zero value is SourceAPI.
type Source uint8

const (
	// SourceAPI: POST /api/v1/observations without a source.
	SourceAPI Source = iota
	// SourceAMI: Asterisk's Manager connection.
	SourceAMI
	// SourceKamailio: the kamailio.cfg lines of docs/routers.md.
	SourceKamailio
)

// NumSources is the number of sources.
const NumSources = int(SourceKamailio) + 1

var sourceLabels = [...]string{"api", "ami", "kamailio"}

// String returns the source's name as the JSON body and the metrics'
// source label spell it.
func (s Source) String() string {
	if int(s) < len(sourceLabels) {
		return sourceLabels[s]
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// ParseSource returns the Source named s.
func ParseSource(s string) (Source, bool) {
	for i, l := range sourceLabels {
		if l == s {
			return Source(i), true
		}
	}
	return 0, false
}

// Observation is the outcome of one call attempt (one INVITE client
// transaction) towards one destination.
type Observation struct {
	// Destination is where the call went, "host:port" as Destination
	// writes it (the kamailio sink's dispatcher destination): it applies
	// to every qualified contact whose URI has that host and port. A
	// host without its port or a SIP URI is read as Destination reads
	// it. Empty when AoR names the AoR instead.
	Destination string
	// AoR names an AoR instead of a destination: the observation applies
	// to its contacts, or with Contact to the one whose URI is Contact.
	// Exactly one of Destination and AoR is set.
	AoR, Contact string
	// Outcome is how the call attempt ended.
	Outcome Outcome
	// Code is the final response's status code: 200 to 299 with Answered
	// (0 means 200), 300 to 699 with Failed, 0 otherwise.
	Code int
	// RetryAfter is a 503's Retry-After (RFC 3261 section 20.33), whole
	// seconds, 0 without one; only with Failed and Code 503. It marks the
	// peer draining rather than failing.
	RetryAfter time.Duration
	// Source is who reported it.
	Source Source
	// Time is when the router saw the outcome (the final response or the
	// failure); zero means when the Sink takes it.
	Time time.Time
}

// Bounds of an observation.
const (
	// MaxRetryAfter bounds RetryAfter as read (a day); the time a contact
	// is held out as draining has its own, lower bound, an option.
	MaxRetryAfter = 86400 * time.Second
	// MaxAge is how old an observation may be when taken; older ones are
	// dropped as stale, since the contact's state has moved on.
	MaxAge = 60 * time.Second
	// MaxSkew is how far in the future an observation's time may be (the
	// router's clock ahead of qualifyd's); further ones are stale too.
	MaxSkew = 5 * time.Second
	// maxName bounds a destination, AoR or contact name.
	maxName = 1024
)

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("invalid observation")

// Validate reports what is wrong with o, or nil.
func (o *Observation) Validate() error {
	switch {
	case (o.Destination == "") == (o.AoR == ""):
		return invalid("want exactly one of destination and aor")
	case o.Contact != "" && o.AoR == "":
		return invalid("contact needs aor")
	case len(o.Destination) > maxName || len(o.AoR) > maxName || len(o.Contact) > maxName:
		return invalid("name longer than %d bytes", maxName)
	case int(o.Source) >= NumSources:
		return invalid("unknown source %d", o.Source)
	case o.RetryAfter < 0 || o.RetryAfter > MaxRetryAfter || o.RetryAfter%time.Second != 0:
		return invalid("retry_after must be whole seconds from 0 to 86400, got %v", o.RetryAfter)
	case o.RetryAfter > 0 && (o.Outcome != Failed || o.Code != 503):
		return invalid("retry_after only with outcome failed and code 503")
	}
	return o.validateCode()
}

// validateCode checks Code against Outcome.
func (o *Observation) validateCode() error {
	switch o.Outcome {
	case Answered:
		if o.Code != 0 && (o.Code < 200 || o.Code > 299) {
			return invalid("answered wants code 200 to 299, got %d", o.Code)
		}
	case Failed:
		if o.Code < 300 || o.Code > 699 {
			return invalid("failed wants code 300 to 699, got %d", o.Code)
		}
	case Timeout, Transport:
		if o.Code != 0 {
			return invalid("%v takes no code, got %d", o.Outcome, o.Code)
		}
	default:
		return invalid("unknown outcome %d", o.Outcome)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Fresh reports whether o, taken at now, is within MaxAge before now and
// MaxSkew after it; an observation without a time is.
func (o *Observation) Fresh(now time.Time) bool {
	if o.Time.IsZero() {
		return true
	}
	d := now.Sub(o.Time)
	return d <= MaxAge && d >= -MaxSkew
}
