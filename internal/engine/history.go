package engine

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Stats are a contact's running statistics since the engine started (or
// since they were restored): they cost a few words per contact.
type Stats struct {
	// SRTT and RTTVar are the smoothed round-trip time and its mean
	// deviation over the successful probes, as RFC 6298's SRTT and
	// RTTVAR (alpha 1/8, beta 1/4); zero before the first success.
	SRTT, RTTVar time.Duration
	// RTTMin and RTTMax bound the RTTs of the successful probes.
	RTTMin, RTTMax time.Duration
	// Probes and Failures count applied probes and failed ones.
	Probes, Failures uint64
	// Loss is the share of failures among the last LossWindow probes
	// (at most 100); zero when LossWindow is zero.
	Loss       float64
	LossWindow int
	// LossBits are the last LossWindow probes' failures, a bit each: the
	// probe numbered i from 0 (as Probes counts them) is bit k%64 of word
	// k/64, k = i%100. A state file keeps them so that Loss survives a
	// restart.
	LossBits [2]uint64
}

// Bucket is one interval of an AoR's history.
type Bucket struct {
	// Start is when the bucket begins; it lasts History.Width.
	Start time.Time
	// Probes and Failures count the probes of the AoR's contacts that
	// ended in the bucket.
	Probes, Failures int
	// Calls counts the calls' outcomes applied to the AoR's contacts in
	// the bucket (qualify-semantics §11), CallFailures those that
	// indicted the peer.
	Calls, CallFailures int
	// RTTMin, RTTP50 and RTTMax are the smallest, median (an estimate)
	// and largest RTT of the bucket's successful probes; zero without one.
	// A closed bucket keeps them to 0.025% past 4.096 ms.
	RTTMin, RTTP50, RTTMax time.Duration
	// Routable is how long within the bucket the AoR was available.
	Routable time.Duration
}

// Change is one status change of a contact of an AoR.
type Change struct {
	Time     time.Time
	URI      string
	From, To qualify.Status
	Reason   qualify.Reason
	Detail   string
	// Code is the final status code of the probe that made the change, if
	// any: with Reason, what asterisk.ReasonText spells.
	Code int
}

// History is an AoR's recent past: buckets of Width, oldest first, and
// its latest status changes, oldest first.
type History struct {
	AoR     string
	Width   time.Duration
	Buckets []Bucket
	Changes []Change
}

// History returns the recent past of the AoR named name; false when the
// AoR is unknown or has no history kept (see Config.HistoryAoRs). The
// buckets run from the first the engine kept (at most
// Config.HistoryLength ago) to the one holding now.
func (e *Engine) History(name string) (History, bool) {
	var h History
	return h, e.HistoryTo(&h, name)
}

// HistoryTo is History into h, reusing h's slices: a caller copying many
// histories allocates nothing after the first.
func (e *Engine) HistoryTo(h *History, name string) bool {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.aors[name]
	if !ok || a.hist == nil {
		return false
	}
	a.hist.advance(now.UnixNano())
	a.hist.public(h, a.name)
	return true
}

// HistoryNames returns the names of the AoRs that have a history, in name
// order (at most Config.HistoryAoRs). The caller must not modify the
// slice.
func (e *Engine) HistoryNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.histNames
}

// RestoreHistory puts saved histories back into the AoRs of the same
// names that have a history now, replacing what they recorded since the
// engine started; it returns how many it restored. The buckets are
// realigned to this engine's width: a saved bucket of another width is
// added to the bucket holding its start. Call it before Run.
func (e *Engine) RestoreHistory(saved []History) int {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for i := range saved {
		a, ok := e.aors[saved[i].AoR]
		if !ok || a.hist == nil {
			continue
		}
		a.hist.restore(&saved[i], now.UnixNano(), a.available())
		n++
	}
	return n
}

// noteProbe records an applied probe of a contact of a, ended at end.
// Called with mu held, only for AoRs with a history.
func (a *aorState) noteProbe(end time.Time, ok bool, rtt time.Duration) {
	a.hist.advance(end.UnixNano())
	a.hist.probe(ok, rtt)
}

// noteCall records a call's outcome applied to a contact of a at now,
// failed when it indicted the peer. Called with mu held, only for AoRs
// with a history.
func (a *aorState) noteCall(now time.Time, failed bool) {
	a.hist.advance(now.UnixNano())
	a.hist.call(failed)
}

// noteAvailable records a's availability from now on, when it has a
// history. Called with mu held.
func (a *aorState) noteAvailable(now time.Time) {
	if a.hist != nil {
		a.hist.advance(now.UnixNano())
		a.hist.avail = a.available()
	}
}

// noteChange records ev, a StatusChanged of a contact of a, when a has a
// history. Called with mu held.
func (a *aorState) noteChange(ev *Event) {
	if a.hist == nil {
		return
	}
	a.hist.change(change{at: ev.Time.UnixNano(), uri: ev.URI, from: ev.From, to: ev.To,
		reason: ev.Reason, code: int16(ev.Result.Code), detail: ev.Result.Detail})
}
