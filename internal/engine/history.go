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
}

// Bucket is one interval of an AoR's history.
type Bucket struct {
	// Start is when the bucket begins; it lasts History.Width.
	Start time.Time
	// Probes and Failures count the probes of the AoR's contacts that
	// ended in the bucket.
	Probes, Failures int
	// RTTMin, RTTP50 and RTTMax are the smallest, median (an estimate)
	// and largest RTT of the bucket's successful probes; zero without one.
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
// AoR is unknown or has no history kept (see Config.HistoryAoRs).
func (e *Engine) History(name string) (History, bool) {
	return History{}, false
}
