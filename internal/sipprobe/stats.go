package sipprobe

import "sync/atomic"

// Stats is a snapshot of a Prober's counters since New. Every dropped
// message is counted under exactly one Dropped* reason.
type Stats struct {
	// Probes is the number of OPTIONS transactions sent (first
	// transmissions, including the one answering a digest challenge).
	Probes uint64
	// Retransmissions is the number of UDP retransmissions (Timer E).
	Retransmissions uint64
	// AuthRetries is the number of probes re-sent with digest credentials.
	AuthRetries uint64
	// Redials is the number of TCP/TLS probes sent again on a fresh
	// connection at their midpoint (docs/qualify-semantics.md §3.2).
	Redials uint64
	// Matched is the number of final responses matched to a probe.
	Matched uint64
	// Provisional is the number of matched 1xx responses (ignored).
	Provisional uint64
	// Timeouts is the number of transactions that reached their deadline.
	Timeouts uint64
	// TransportErrors counts probes failed by a send, connect or TLS error.
	TransportErrors uint64
	// DroppedLate counts responses for no outstanding transaction: late
	// (after a timeout) or never sent by this prober.
	DroppedLate uint64
	// DroppedDuplicate counts responses to a transaction already answered.
	DroppedDuplicate uint64
	// DroppedWrongSource counts responses whose branch matches but that
	// came from another address or transport than the probe went to.
	DroppedWrongSource uint64
	// DroppedMismatch counts responses whose branch matches but whose
	// Call-ID or CSeq do not.
	DroppedMismatch uint64
	// DroppedMalformed counts messages that do not parse as SIP or lack
	// the headers needed to match them.
	DroppedMalformed uint64
	// DroppedOversized counts messages larger than Config.MaxMessageSize.
	DroppedOversized uint64
	// DroppedRequests counts incoming requests other than OPTIONS.
	DroppedRequests uint64
	// OptionsAnswered counts incoming OPTIONS answered with 200 OK (counted
	// when the answer is written, whether or not the write succeeds).
	OptionsAnswered uint64
}

// counters is the live, atomically updated form of Stats.
type counters struct {
	probes, retransmissions, authRetries, redials, matched       atomic.Uint64
	provisional                                                  atomic.Uint64
	timeouts, transportErrors                                    atomic.Uint64
	late, duplicate, wrongSource, mismatch, malformed, oversized atomic.Uint64
	requests, optionsAnswered                                    atomic.Uint64
}

// Stats returns a snapshot of the prober's counters. It is safe to call at
// any time, also after Close.
func (p *Prober) Stats() Stats {
	c := &p.stats
	return Stats{
		Probes: c.probes.Load(), Retransmissions: c.retransmissions.Load(),
		AuthRetries: c.authRetries.Load(), Redials: c.redials.Load(), Matched: c.matched.Load(),
		Provisional: c.provisional.Load(), Timeouts: c.timeouts.Load(),
		TransportErrors: c.transportErrors.Load(), DroppedLate: c.late.Load(),
		DroppedDuplicate: c.duplicate.Load(), DroppedWrongSource: c.wrongSource.Load(),
		DroppedMismatch: c.mismatch.Load(), DroppedMalformed: c.malformed.Load(),
		DroppedOversized: c.oversized.Load(), DroppedRequests: c.requests.Load(),
		OptionsAnswered: c.optionsAnswered.Load(),
	}
}
