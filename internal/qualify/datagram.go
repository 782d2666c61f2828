package qualify

import (
	"net/netip"
	"time"
)

// Answer is a response to a datagram probe, one whose timing the engine
// keeps instead of the prober (see engine.DatagramProber): the prober
// checked that it answers the probe its key names (Call-ID, CSeq), and
// the engine checks that the probe is still outstanding and that the
// answer came from where it went.
type Answer struct {
	// From is the response's source address.
	From netip.AddrPort
	// Code is its status code: below 200 a provisional response, which
	// ends nothing but slows retransmissions (RFC 3261 section 17.1.2.2).
	Code int
	// At is when it was received.
	At time.Time
}

// Match is what the engine made of an Answer, for the prober to count.
type Match uint8

const (
	// MatchLate: no outstanding probe has the key; the probe ended (a
	// timeout, an earlier answer) or was never sent.
	MatchLate Match = iota
	// Matched: the answer was applied (final), or noted (provisional).
	Matched
	// MatchWrongSource: the probe is outstanding, but the answer came
	// from another address than the probe went to.
	MatchWrongSource
)
