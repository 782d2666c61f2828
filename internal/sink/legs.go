package sink

import (
	"strconv"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Legs follows the outgoing PJSIP legs in Asterisk's Manager call events
// (Newchannel, Newstate, Hangup) and turns the outcome of each leg
// towards a watched endpoint into an Observation of each of its AoRs:
//
//   - the leg answered (Newstate Up): Answered, at once;
//   - Hangup with TechCause 408 and no 180 before it (no Newstate
//     Ringing): Timeout, the INVITE transaction's Timer B (a peer's own
//     408 reads the same; both make the contact suspect, nothing more);
//   - Hangup with another TechCause from 300 to 699 but 487 (the reply to
//     the router's own CANCEL): Failed with that code. chan_pjsip reports
//     a transport failure as 503 too, and a 503's Retry-After is not in
//     the events: the contact's next probe reads it;
//   - Hangup without TechCause (the caller or Dial's timeout cancelled
//     the leg, before any final response) or 487: nothing, since a
//     callee who does not pick up says nothing of the trunk.
//
// It is pure: no I/O, no clock, no lock; the Manager connection feeds it
// one event at a time. The legs it follows are bounded (maxLegs).
type Legs struct {
	// aors maps a watched endpoint to its qualified AoRs.
	aors map[string][]string
	// legs are the outgoing legs followed, by Uniqueid.
	legs map[string]*leg
	// Stats counts the events and what became of them.
	Stats LegStats
}

// leg is one outgoing PJSIP channel towards a watched endpoint.
type leg struct {
	endpoint          string
	ringing, answered bool
}

// LegStats counts what Legs did with the events it was fed.
type LegStats struct {
	// Events counts the events read.
	Events uint64
	// Observations counts the observations made.
	Observations uint64
	// Dropped counts the events of a followed leg that could not be
	// read (a missing or malformed field), and the legs not followed
	// because maxLegs were.
	Dropped uint64
}

// maxLegs bounds the legs followed at once: more than the calls of any
// one Asterisk, and a bound on the memory a broken Manager (legs that
// never hang up) can make them take.
const maxLegs = 1 << 16

// Channel states of the Manager's ChannelState field (enum
// ast_channel_state).
const (
	stateDown    = "0"
	stateRinging = "5"
	stateUp      = "6"
)

// NewLegs returns a Legs watching the endpoints of conf with at least one
// qualified AoR that has contacts.
func NewLegs(conf *pjsip.Config) *Legs {
	qualified := map[string]bool{}
	for i := range conf.AoRs {
		a := &conf.AoRs[i]
		if p := a.PolicyValue(); p.Enabled() && len(a.Contacts) > 0 {
			qualified[a.Name] = true
		}
	}
	aors := map[string][]string{}
	for _, e := range conf.Endpoints {
		for _, name := range e.AoRs {
			if qualified[name] {
				aors[e.Name] = append(aors[e.Name], name)
			}
		}
	}
	return &Legs{aors: aors, legs: map[string]*leg{}}
}

// Reset forgets the legs followed: after a reconnect, their events may
// have been lost.
func (l *Legs) Reset() { clear(l.legs) }

// Len returns the number of legs followed.
func (l *Legs) Len() int { return len(l.legs) }

// Event feeds one Manager message seen at now, and returns the
// observations it ends in (appended to out).
func (l *Legs) Event(out []observe.Observation, now time.Time, m map[string]string) []observe.Observation {
	ev := m["Event"]
	if ev == "" {
		return out
	}
	l.Stats.Events++
	switch ev {
	case "Newchannel":
		l.begin(m)
	case "Newstate":
		return l.state(out, now, m)
	case "Hangup":
		return l.hangup(out, now, m)
	}
	return out
}

// begin follows a new outgoing channel to a watched endpoint: one
// chan_pjsip created in state Down (an incoming one starts in Ring).
func (l *Legs) begin(m map[string]string) {
	ep, ok := endpointOf(m["Channel"])
	if !ok || m["ChannelState"] != stateDown || l.aors[ep] == nil {
		return
	}
	id := m["Uniqueid"]
	switch {
	case id == "" || len(id) > 64:
		l.Stats.Dropped++
	case l.legs[id] != nil:
	case len(l.legs) >= maxLegs:
		l.Stats.Dropped++
	default:
		l.legs[id] = &leg{endpoint: ep}
	}
}

// state notes a followed leg ringing, or answered: an Answered
// observation.
func (l *Legs) state(out []observe.Observation, now time.Time, m map[string]string) []observe.Observation {
	g := l.legs[m["Uniqueid"]]
	if g == nil || g.answered {
		return out
	}
	switch m["ChannelState"] {
	case stateRinging:
		g.ringing = true
	case stateUp:
		g.answered = true
		return l.observe(out, now, g, observe.Answered, 0)
	}
	return out
}

// hangup ends a followed leg, in an observation when its TechCause
// tells the peer's answer or the transaction's failure.
func (l *Legs) hangup(out []observe.Observation, now time.Time, m map[string]string) []observe.Observation {
	id := m["Uniqueid"]
	g := l.legs[id]
	if g == nil {
		return out
	}
	delete(l.legs, id)
	tc, ok := m["TechCause"]
	if g.answered || !ok {
		return out
	}
	code, err := strconv.Atoi(tc)
	switch {
	case err != nil || code < 100 || code > 699:
		l.Stats.Dropped++
	case code == 408 && !g.ringing:
		return l.observe(out, now, g, observe.Timeout, 0)
	case code >= 300 && code != 487:
		return l.observe(out, now, g, observe.Failed, code)
	}
	return out
}

// observe appends an observation of each of g's endpoint's AoRs.
func (l *Legs) observe(out []observe.Observation, now time.Time, g *leg, o observe.Outcome, code int) []observe.Observation {
	for _, aor := range l.aors[g.endpoint] {
		out = append(out, observe.Observation{AoR: aor, Outcome: o, Code: code, Source: observe.SourceAMI, Time: now})
		l.Stats.Observations++
	}
	return out
}

// endpointOf returns the endpoint of a chan_pjsip channel name,
// "PJSIP/ENDPOINT-XXXXXXXX" (eight hex digits).
func endpointOf(channel string) (string, bool) {
	rest, ok := strings.CutPrefix(channel, "PJSIP/")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 || len(rest)-i-1 != 8 {
		return "", false
	}
	if _, err := strconv.ParseUint(rest[i+1:], 16, 32); err != nil {
		return "", false
	}
	return rest[:i], true
}
