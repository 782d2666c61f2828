package sipprobe

import (
	"bytes"
	"errors"
	"hash/maphash"
	"net/netip"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Datagram probes are UDP probes to an IP address that the engine times
// (engine.DatagramProber): the prober keeps nothing for them, neither a
// transaction nor a timer event, so that a probe in flight costs no
// memory beyond what its contact already has in the engine (issue 7: with
// a million dead contacts, 50,000 probes are in flight). Their branch
// key is the engine's with datagramBit set; the table's keys never have
// it, since their slot (the low 32 bits) is below maxSlots. The Call-ID
// is a keyed hash of the key, so an answer is checked without state.

// datagramBit marks the branch key of a datagram probe.
const datagramBit = 1 << 31

// Datagram reports whether a probe of t can be a datagram probe (a sip:
// URI with an IP address, over UDP, without an outbound proxy or
// credentials) and where it goes. It is pure and cheap.
func (p *Prober) Datagram(t qualify.Target) (netip.AddrPort, bool) {
	var rt route
	if !fastRoute(t.URI, t.Options, &rt) || (t.Options != nil && t.Options.Auth.Username != "") {
		return netip.AddrPort{}, false
	}
	return rt.dest, true
}

// Step sends the datagram probe key of t as of its event elapsed after
// its start: the first transmission at 0, else a retransmission of the
// same request (same branch, Call-ID and CSeq). At or past t.Timeout
// (qualify.SIPTransactionTimeout when <= 0) it sends nothing and ends the
// probe with reason timeout; a failed first send ends it with reason
// transport.
// Otherwise it returns the wait until the next retransmission (Timer E,
// see timerE), cut at the timeout. The key's bit 31 must be 0.
func (p *Prober) Step(t qualify.Target, key uint64, elapsed time.Duration, proceeding bool) (time.Duration, qualify.Result, bool) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = qualify.SIPTransactionTimeout
	}
	var rt route
	if !fastRoute(t.URI, t.Options, &rt) {
		p.stats.transportErrors.Add(1)
		return 0, qualify.Result{Reason: qualify.ReasonTransport, Detail: "not a datagram probe"}, true
	}
	res := qualify.Result{Transport: udp.String(), Dest: rt.dest}
	if elapsed >= timeout {
		p.stats.timeouts.Add(1)
		res.Reason = qualify.ReasonTimeout
		return 0, res, true
	}
	if elapsed == 0 {
		p.stats.probes.Add(1)
	} else {
		p.stats.retransmissions.Add(1)
	}
	// A failed retransmission does not end the probe: the answer to an
	// earlier send may still come (as the table's timers do).
	if err := p.sendDatagram(&rt, key); err != nil && elapsed == 0 {
		p.stats.transportErrors.Add(1)
		res.Reason, res.Detail = qualify.ReasonTransport, err.Error()
		return 0, res, true
	}
	return min(timerE(elapsed, proceeding), timeout-elapsed), qualify.Result{}, false
}

// timerE is the wait from a transmission sent elapsed after the first to
// the next (RFC 3261 section 17.1.2.2): T1 doubling at each one (sends at
// 0, 0.5, 1.5, 3.5 s, so the wait is elapsed + T1), at most T2, and T2
// once a provisional response came (Proceeding).
func timerE(elapsed time.Duration, proceeding bool) time.Duration {
	if proceeding {
		return T2
	}
	return min(elapsed+T1, T2)
}

// errSendFailed is the detail of a datagram probe whose send failed, as
// of a probe of the table.
var errSendFailed = errors.New(detailSendFailed.String())

// sendDatagram builds the request of the datagram probe key to rt and
// sends it.
func (p *Prober) sendDatagram(rt *route, key uint64) error {
	h, err := p.udpHeaders(rt, rt.dest)
	if err != nil {
		return err
	}
	r := request{ruri: rt.ruri, hdr: h, key: key | datagramBit, callID: p.datagramCallID(key), cseq: 1}
	bp := p.bufs.Get().(*[]byte)
	b := appendRequest((*bp)[:0], &r, "", "")
	err = p.udp.send(b, rt.dest)
	*bp = b[:0]
	p.bufs.Put(bp)
	if err != nil {
		return errSendFailed
	}
	return nil
}

// datagramCallID is the Call-ID of the datagram probe key: a hash of the
// key keyed by a seed drawn per prober, so that an answer cannot be
// forged without seeing the request, as with a random Call-ID.
func (p *Prober) datagramCallID(key uint64) uint64 {
	return maphash.Comparable(p.seed, key)
}

// AnswerDatagrams makes f receive the responses to datagram probes whose
// Call-ID and CSeq match their branch, from the receive goroutine. f
// reports what it made of each; the prober counts it (after f returns,
// unlike the table's probes, whose counters run ahead of their results).
func (p *Prober) AnswerDatagrams(f func(key uint64, a qualify.Answer) qualify.Match) {
	p.answer.Store(&f)
}

// answerDatagram hands the response m to the datagram probe key (its
// datagramBit set), received from src on conn (nil for UDP) at now, to
// the engine, and counts the outcome.
func (p *Prober) answerDatagram(m *message, key uint64, src netip.AddrPort, conn *streamConn, now instant) {
	f := p.answer.Load()
	var d drop
	switch {
	case f == nil:
		d = dropLate
	case conn != nil:
		d = dropWrongSource // datagram probes go over UDP only
	case !callMatches(m, p.datagramCallID(key&^datagramBit), 1):
		d = dropMismatch
	default:
		d = p.matchDatagram(*f, m, key, src, now)
	}
	p.stats.count(d, d == dropNone && m.code < 200)
}

// matchDatagram asks f about m and returns why it was not matched.
func (p *Prober) matchDatagram(f func(uint64, qualify.Answer) qualify.Match, m *message, key uint64, src netip.AddrPort, now instant) drop {
	switch f(key&^datagramBit, qualify.Answer{From: src, Code: m.code, At: p.table.time(now)}) {
	case qualify.Matched:
		if m.code >= 200 {
			p.stats.matched.Add(1)
			p.table.remember(key)
		}
		return dropNone
	case qualify.MatchWrongSource:
		return dropWrongSource
	}
	if p.table.answered(key) {
		return dropDuplicate
	}
	return dropLate
}

// callMatches reports whether m has the Call-ID and CSeq of an OPTIONS
// request.
func callMatches(m *message, callID uint64, cseq uint32) bool {
	var id [16]byte
	return m.cseq == cseq && string(m.cseqMethod) == "OPTIONS" && bytes.Equal(m.callID, appendHex(id[:0], callID))
}
