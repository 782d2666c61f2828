package engine

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// StatusChanged: a contact's status changed (From -> To), including
	// Removed on reload and the reset to NonQualified of a changed contact.
	StatusChanged EventKind = iota + 1
	// ProbeFailed: a failed probe was counted towards N without changing
	// the status (the contact is suspect).
	ProbeFailed
	// RecoveryProgress: a success was counted towards M without changing
	// the status (the contact is recovering).
	RecoveryProgress
	// AvailabilityChanged: an AoR became available or unavailable (at
	// least one routable contact, or none).
	AvailabilityChanged
	// FailuresCleared: a success ended a run of failures that had not
	// made the contact Unreachable (it was suspect, and is healthy
	// again). With ProbeFailed it tells a subscriber which contacts are
	// failing now, from the first failed probe of a run.
	FailuresCleared
	// DrainChanged: a contact's peer began a pause (a 503 with
	// Retry-After: Draining true, out of routing until Next) or it ended
	// without a status change (Draining false).
	DrainChanged
)

var kindLabels = [...]string{"", "status", "failure", "recovery", "availability", "cleared", "draining"}

// String returns the kind's short name, as used in the event stream.
func (k EventKind) String() string {
	if int(k) < len(kindLabels) && k > 0 {
		return kindLabels[k]
	}
	return "unknown"
}

// Event is one edge. Contact events carry the contact and its counters;
// AvailabilityChanged carries only AoR, Time and Available.
type Event struct {
	// Seq numbers events from Config.Seq+1, without gaps, in publication
	// order.
	Seq  uint64
	Kind EventKind
	Time time.Time
	AoR  string
	URI  string
	// From and To are the statuses before and after; equal unless Kind is
	// StatusChanged.
	From, To qualify.Status
	// Routable is whether the contact may carry calls after the event.
	Routable bool
	// LatencyOnly mirrors the AoR's qualify_latency_only.
	LatencyOnly bool
	// Failures and Successes are the counters after the event, out of
	// FailureThreshold (N) and SuccessThreshold (M).
	Failures, Successes                int
	FailureThreshold, SuccessThreshold int
	// Result is the probe that caused the event; zero for reload events.
	Result qualify.Result
	// Reason is the probe's verdict: ReasonNone for a success.
	Reason qualify.Reason
	// Next is when the contact's next probe is due; zero if none.
	Next time.Time
	// Available is the AoR's availability after an AvailabilityChanged.
	Available bool
	// Draining reports that the contact's peer asked for a pause after
	// the event: out of routing until Next.
	Draining bool
}

// Subscription receives events. A subscriber that falls behind loses the
// events that do not fit its buffer; they are counted, and probing never
// waits for it.
type Subscription struct {
	// C delivers the events in order. It is closed by Close.
	C <-chan Event

	// Seq is the number of the last event published before the
	// subscription: the first event C delivers is Seq+1, unless it was
	// dropped.
	Seq uint64

	ch      chan Event
	dropped atomic.Uint64
	e       *Engine
}

// Subscribe returns a subscription with room for buffer events.
func (e *Engine) Subscribe(buffer int) *Subscription {
	ch := make(chan Event, max(buffer, 1))
	s := &Subscription{C: ch, ch: ch, e: e}
	e.mu.Lock()
	s.Seq = e.seq
	e.subs = append(e.subs, s)
	e.mu.Unlock()
	return s
}

// Seq returns the number of the last event published; Config.Seq before
// the first.
func (e *Engine) Seq() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seq
}

// Durable counts the changes a restart must see: every event published
// (status changes, failures counted towards N, successes counted towards
// M, availability changes) and every other change of a contact's status
// or consecutive counters, such as a suspect contact's failures reset by
// a success. It does not move for what each probe changes without a
// verdict moving: the last result, the RTT, the statistics and the loss
// counts the auto threshold learns from. A state file written when it
// moves holds every status and counter a restart restores
// (qualify-semantics §8).
func (e *Engine) Durable() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.durable
}

// StartSeq returns a Config.Seq for an engine started at t that no
// previous process can have reached: t's microseconds since the Unix
// epoch, so that the ids of a process started later are larger as long
// as no process publishes more than a million events a second on
// average over its life. It stays below 2^53 (an exact JavaScript
// number) until the year 2255.
func StartSeq(t time.Time) uint64 { return uint64(max(t.UnixMicro(), 0)) }

// Dropped returns how many events did not fit the buffer.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription and closes C. It is idempotent.
func (s *Subscription) Close() {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	i := slices.Index(s.e.subs, s)
	if i < 0 {
		return
	}
	s.e.subs = slices.Delete(s.e.subs, i, i+1)
	close(s.ch)
}

// publish numbers ev and offers it to every subscriber without blocking.
// Called with mu held, which orders events.
func (e *Engine) publish(ev Event) {
	e.seq++
	e.durable++
	ev.Seq = e.seq
	for _, s := range e.subs {
		select {
		case s.ch <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}

// contactEvent builds an event of kind k for the contact in slot id, in its
// current state. Called with mu held.
func (e *Engine) contactEvent(k EventKind, id uint32, from qualify.Status, now time.Time) Event {
	c := &e.slots[id]
	p := c.aor.policy
	return Event{
		Kind: k, Time: now, AoR: c.aor.name, URI: c.uri,
		From: from, To: c.state.Status,
		Routable:    p.RoutableState(c.state),
		Draining:    c.state.Draining,
		LatencyOnly: p.LatencyOnly,
		Failures:    int(c.state.Failures), Successes: int(c.state.Successes),
		FailureThreshold: p.FailureThresholdFor(c.state), SuccessThreshold: p.SuccessThreshold(),
		Next: c.due().wall(),
	}
}
