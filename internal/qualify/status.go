package qualify

import "strconv"

// Status is a contact's qualify status. The zero value is NonQualified.
type Status uint8

const (
	// NonQualified is a contact that was created and not yet qualified, or
	// whose AoR has qualify off (qualify_frequency=0). It is routable.
	NonQualified Status = iota
	// Reachable is a contact whose probes succeed.
	Reachable
	// Unreachable is a contact that failed qualify_failures consecutive
	// probes and has not yet had qualify_successes consecutive successes.
	Unreachable
	// Removed is a contact deleted by a reload. It only appears in the
	// transition that deletes it.
	Removed
)

var statusLabels = [...]string{"NonQualified", "Reachable", "Unreachable", "Removed"}

// String returns Asterisk's label for the status, as printed in
// "Contact AOR/URI is now LABEL".
func (s Status) String() string {
	if int(s) < len(statusLabels) {
		return statusLabels[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// ParseStatus returns the Status whose label is s.
func ParseStatus(s string) (Status, bool) {
	for i, l := range statusLabels {
		if l == s {
			return Status(i), true
		}
	}
	return 0, false
}

// Reason says why a probe failed. The zero value, ReasonNone, means it did
// not.
type Reason uint8

const (
	// ReasonNone means the probe succeeded.
	ReasonNone Reason = iota
	// ReasonTimeout means no final response arrived before the deadline.
	ReasonTimeout
	// ReasonTransport means the transport failed: a refused TCP connection,
	// a TLS handshake or certificate failure, a send error. An ICMP error
	// answering a UDP probe is not seen: that probe times out
	// (docs/qualify-semantics.md §3.2).
	ReasonTransport
	// ReasonStatus means a final response arrived that the policy does not
	// accept (a non-2xx response with qualify_2xx_only).
	ReasonStatus
	// ReasonDNS means the contact's host name did not resolve.
	ReasonDNS
	// ReasonDraining means the peer answered 503 with Retry-After: it is
	// draining, out of routing for the time it asked, and the probe
	// counts as no failure (qualify-semantics §11.4).
	ReasonDraining
)

// NumReasons is the number of reasons, ReasonNone included: the length of
// an array indexed by Reason.
const NumReasons = int(ReasonDraining) + 1

var reasonLabels = [...]string{"none", "timeout", "transport", "status", "dns", "draining"}

// String returns the reason's lower-case name, as used in logs, JSON and
// metric labels.
func (r Reason) String() string {
	if int(r) < len(reasonLabels) {
		return reasonLabels[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Phase is where a contact stands in its failure handling; it decides which
// interval schedules the next probe. It is derived from State and never
// stored.
type Phase uint8

const (
	// Healthy: not Unreachable and no failure counted. Next probe after F.
	Healthy Phase = iota
	// Suspect: not Unreachable, 1 <= failures < N. Next probe after R.
	Suspect
	// Down: Unreachable with no success yet. Next probe after D.
	Down
	// Recovering: Unreachable, 1 <= successes < M. Next probe after R.
	Recovering
	// Draining: the peer asked for a pause (503 with Retry-After); out of
	// routing until the next probe, due when the pause ends.
	Draining
)

var phaseLabels = [...]string{"healthy", "suspect", "down", "recovering", "draining"}

// String returns the phase's lower-case name.
func (p Phase) String() string {
	if int(p) < len(phaseLabels) {
		return phaseLabels[p]
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}
