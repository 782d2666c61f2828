package sipprobe

import (
	"math"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// phase is the state of a non-INVITE client transaction (RFC 3261
// section 17.1.2.2, figure 6; docs/qualify-semantics.md §3.2).
type phase uint8

const (
	// phaseTrying: the request was sent and nothing has answered it.
	// Over UDP, Timer E retransmits it at T1, doubling up to T2.
	phaseTrying phase = iota
	// phaseProceeding: a provisional response came; Timer E is T2.
	phaseProceeding
	// phaseCompleted: the final response came; Timer K (T4 over UDP)
	// absorbs its retransmissions.
	phaseCompleted
	// phaseTerminated: the transaction is over.
	phaseTerminated
)

func (p phase) String() string {
	return [...]string{"Trying", "Proceeding", "Completed", "Terminated"}[p]
}

// noTimer is the next instant of an action that arms no timer.
const noTimer instant = math.MinInt64

// action is what the driver of a machine does after an event: pass the
// request to the transport (the first send or a Timer E
// retransmission), or to a fresh connection (redial), and arm the
// transaction's one timer for next.
type action struct {
	send   bool
	redial bool
	next   instant // noTimer: arm none; an armed timer stays armed
}

// machine is the RFC 3261 non-INVITE client transaction of one probe
// (section 17.1.2.2), for UDP and for TCP/TLS alike. It is pure: its
// driver feeds it events at explicit instants (start, a response, its
// timer firing, a failure) and does what it returns. The goroutine that
// sends a transaction starts it; once registered, the pending table and
// the timer goroutine drive it under the table's mutex. Nothing else
// knows its timers.
//
//   - Timer E retransmits over UDP at T1, doubling up to T2 in Trying and
//     at T2 in Proceeding; reliable transports never retransmit on their
//     connection (RFC 3261 sections 17.1.2.2 and 18).
//   - The midpoint: a request sent over TCP/TLS on a connection its probe
//     did not dial, still in Trying halfway from the send to the
//     deadline, is passed to a fresh connection once (the driver
//     redials if nothing was received on the old one since the send;
//     docs/qualify-semantics.md §3.2). Half the time is left for the
//     dial, the TLS handshake and the answer, as much as the old
//     connection had; a connection that carries answers is never
//     redialled.
//   - Timer F is replaced by the qualify deadline, qualify_timeout after
//     the probe's first send (64*T1 when <= 0, see deadlineAfter); a
//     digest retry is a second transaction within the same deadline.
//   - Timer K is T4 over UDP and 0 over TCP/TLS. The table does not keep
//     a Completed transaction in flight for it: it frees the slot at the
//     final response and remembers the branch in its answered-key set,
//     which absorbs (and counts) the retransmitted responses instead.
//
// The machine records the outcome too: the final response's code, or why
// it terminated without one. The zero machine is not started.
type machine struct {
	deadline  instant
	code      int16 // of the final response
	reason    qualify.Reason
	detail    detail
	phase     phase
	reliable  bool  // TCP or TLS
	redial    bool  // the midpoint is still to come (reliable only)
	doublings uint8 // Timer E in Trying is T1 << doublings, at most T2
}

// maxDoublings is where Timer E stops doubling: T1 << 3 == T2.
const maxDoublings = 3

// deadlineAfter is the qualify deadline of a probe first sent at sent:
// timeout later, or 64*T1 (Timer F) when timeout <= 0.
func deadlineAfter(sent instant, timeout time.Duration) instant {
	if timeout <= 0 {
		timeout = qualify.SIPTransactionTimeout
	}
	return sent.add(timeout)
}

// start passes the request to the transport at now, in Trying, and arms
// Timer E (UDP), the midpoint (TCP/TLS with redial: a connection the
// probe did not dial) or the deadline. A transaction started at or past
// its deadline terminates at once with reason timeout and sends nothing.
func (m *machine) start(now, deadline instant, reliable, redial bool) action {
	*m = machine{deadline: deadline, reliable: reliable, redial: reliable && redial}
	if now >= deadline {
		m.end(qualify.ReasonTimeout, detailNone)
		return action{next: noTimer}
	}
	return action{send: true, next: m.timerE(now)}
}

// timerE is when the timer fires after a transmission at now: Timer E,
// cut at the deadline, or over a reliable transport the midpoint or the
// deadline.
func (m *machine) timerE(now instant) instant {
	if m.redial {
		return now + (m.deadline-now)/2
	}
	if m.reliable {
		return m.deadline
	}
	interval := T2
	if m.phase == phaseTrying {
		interval = min(T1<<m.doublings, T2)
	}
	return min(now.add(interval), m.deadline)
}

// fire handles the timer armed for due. At the deadline the transaction
// terminates with reason timeout; before it, Timer E retransmits and
// rearms, or the midpoint redials in Trying (not after a provisional
// response) and arms the deadline; Timer K terminates a Completed
// transaction. due is the instant
// the timer was armed for, not when the driver got to it, so a late
// wake-up keeps the schedule: 0.5, 1.5, 3.5, 7.5, 11.5 s ...
func (m *machine) fire(due instant) action {
	switch {
	case m.phase == phaseCompleted:
		m.phase = phaseTerminated
		return action{next: noTimer}
	case m.phase == phaseTerminated:
		return action{next: noTimer}
	case due >= m.deadline:
		m.end(qualify.ReasonTimeout, detailNone)
		return action{next: noTimer}
	case m.reliable:
		a := action{redial: m.redial && m.phase == phaseTrying, next: m.deadline}
		m.redial = false
		return a
	}
	if m.phase == phaseTrying {
		m.doublings = min(m.doublings+1, maxDoublings)
	}
	return action{send: true, next: m.timerE(due)}
}

// receive handles a response with status code at now and reports
// whether it completed the transaction. A provisional response moves
// Trying to Proceeding and leaves the armed timer as it is; a final one
// moves to Completed and arms Timer K (T4), or over a reliable transport
// (Timer K = 0) terminates. Responses in Completed are retransmissions:
// absorbed, like everything after Terminated.
func (m *machine) receive(code int, now instant) (bool, action) {
	switch {
	case m.phase >= phaseCompleted:
		return false, action{next: noTimer}
	case code < 200:
		m.phase = phaseProceeding
		return false, action{next: noTimer}
	}
	m.code = int16(code)
	if m.reliable {
		m.phase = phaseTerminated
		return true, action{next: noTimer}
	}
	m.phase = phaseCompleted
	return true, action{next: now.add(T4)}
}

// end terminates the transaction without a final response, with reason
// and detail: Timer F, a transport error, a cancellation.
func (m *machine) end(reason qualify.Reason, d detail) {
	m.phase, m.reason, m.detail = phaseTerminated, reason, d
}

// detail says more about a failure than its reason; it is a number so
// that it costs a transaction one byte.
type detail uint8

const (
	detailNone detail = iota
	detailSendFailed
	detailCanceled
	detailClosed
	detailConnClosed
)

func (d detail) String() string {
	return [...]string{"", "send failed", "canceled", "prober closed", "connection closed"}[d]
}
