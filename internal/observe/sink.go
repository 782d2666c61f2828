package observe

import "strconv"

// Sink takes observations. The daemon's Sink matches each to the
// contacts it concerns and applies it at once, under the engine's lock:
// nothing is queued, so a flood costs the sender, never memory. Observe
// is safe for concurrent use, never blocks on I/O and never waits for a
// probe; what it cannot take it drops and counts in the Tally it
// returns (and in qualifyd_observations_dropped_total).
type Sink interface {
	Observe(batch []Observation) Tally
}

// Refuser is a Sink that also counts what a source dropped before
// handing a batch over: a body that did not parse or was too large, an
// event that could not be read. The daemon's Sink is one.
type Refuser interface {
	Refused(Tally)
}

// Drop says why an observation was dropped.
type Drop uint8

const (
	// DropMalformed: the observation (or the whole body) did not parse or
	// failed Validate.
	DropMalformed Drop = iota
	// DropOversized: the body was over MaxBody, or the batch over
	// MaxBatch.
	DropOversized
	// DropUnknown: no qualified contact has the destination, or the AoR
	// or contact is not configured (or is probed by another node of a
	// cluster).
	DropUnknown
	// DropStale: its time was out of [now-MaxAge, now+MaxSkew].
	DropStale
	// DropFlood: over the daemon's rate of observations per second.
	DropFlood
)

// NumDrops is the number of drop reasons.
const NumDrops = int(DropFlood) + 1

var dropLabels = [...]string{"malformed", "oversized", "unknown", "stale", "flood"}

// String returns the reason as the metrics' reason label and the API's
// reply spell it.
func (d Drop) String() string {
	if int(d) < len(dropLabels) {
		return dropLabels[d]
	}
	return "drop(" + strconv.Itoa(int(d)) + ")"
}

// Tally counts what a Sink did with a batch.
type Tally struct {
	// Accepted counts the observations applied to at least one contact.
	Accepted int
	// BySource counts the accepted ones by source and outcome.
	BySource [NumSources][NumOutcomes]int
	// Dropped counts the others by reason.
	Dropped [NumDrops]int
}

// Add adds u to t.
func (t *Tally) Add(u Tally) {
	t.Accepted += u.Accepted
	for s := range u.BySource {
		for o, n := range u.BySource[s] {
			t.BySource[s][o] += n
		}
	}
	for i, n := range u.Dropped {
		t.Dropped[i] += n
	}
}

// Drops returns the total dropped.
func (t *Tally) Drops() int {
	n := 0
	for _, d := range t.Dropped {
		n += d
	}
	return n
}
