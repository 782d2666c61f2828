package simulate

import (
	"math/rand/v2"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
)

// caller places the calls of Calls and holds their outcomes until the
// router sees them: at once when answered, Timeout later when the peer
// is dead.
type caller struct {
	cfg     Calls
	placed  time.Time   // the next call's start; zero without calls
	pending []heardCall // outcomes to report, by time
}

// heardCall is a call's outcome and when the router sees it.
type heardCall struct {
	at  time.Time
	out observe.Outcome
}

func newCaller(c Calls, rng *rand.Rand) caller {
	if c.Interval <= 0 {
		return caller{}
	}
	return caller{cfg: c, placed: epoch.Add(time.Duration(rng.Float64() * float64(c.Interval)))}
}

// next returns the time of the next call event: a call placed or an
// outcome seen; false without calls.
func (c *caller) next() (time.Time, bool) {
	if c.placed.IsZero() {
		return time.Time{}, false
	}
	if len(c.pending) > 0 && c.pending[0].at.Before(c.placed) {
		return c.pending[0].at, true
	}
	return c.placed, true
}

// call runs the call event at at: a call placed, whose outcome the peer
// decides, or an outcome the router sees, reported to the engine.
func (s *sim) call(at time.Time) {
	s.now = at
	c := &s.calls
	if len(c.pending) > 0 && c.pending[0].at.Before(c.placed) {
		h := c.pending[0]
		c.pending = c.pending[1:]
		s.e.Observe([]observe.Observation{{AoR: s.name, Outcome: h.out}})
		s.drain()
		return
	}
	h := heardCall{at: at, out: observe.Answered}
	if !s.peer.alive(at) {
		h = heardCall{at: at.Add(c.cfg.Timeout), out: observe.Timeout}
	}
	i := len(c.pending)
	c.pending = append(c.pending, h)
	for i > 0 && c.pending[i-1].at.After(h.at) {
		c.pending[i] = c.pending[i-1]
		i--
	}
	c.pending[i] = h
	c.placed = c.placed.Add(c.cfg.Interval)
}
