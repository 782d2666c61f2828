package observe

import "time"

// Defaults of the daemon's flood limit: observations a second over every
// source, and the burst taken at once. A router placing 1000 call
// attempts a second is far beyond the trunks qualifyd watches; a sender
// beyond it loses the excess (DropFlood), never queues it.
const (
	DefaultRate  = 1000
	DefaultBurst = 2000
)

// Limiter is a token bucket of observations: Rate a second, at most
// Burst at once. The zero value takes nothing; it is not safe for
// concurrent use.
type Limiter struct {
	// Rate is the tokens added a second; Burst the most held.
	Rate, Burst float64
	tokens      float64
	last        time.Time
}

// NewLimiter returns a full Limiter of rate a second and burst.
func NewLimiter(rate, burst float64) *Limiter {
	return &Limiter{Rate: rate, Burst: burst, tokens: burst}
}

// Take takes up to n tokens at now and returns how many it took.
func (l *Limiter) Take(now time.Time, n int) int {
	if !l.last.IsZero() && now.After(l.last) {
		l.tokens = min(l.Burst, l.tokens+now.Sub(l.last).Seconds()*l.Rate)
	}
	if l.last.IsZero() || now.After(l.last) {
		l.last = now
	}
	took := min(n, int(l.tokens))
	l.tokens -= float64(took)
	return took
}
