package simulate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Timer E of RFC 3261 section 17.1.2.2: a UDP request is retransmitted
// T1 after the first send, the interval doubling up to T2.
const (
	T1 = 500 * time.Millisecond
	T2 = 4 * time.Second
)

// DefaultRTT is the simulated path's round-trip time when Config leaves it
// zero.
const DefaultRTT = 20 * time.Millisecond

// maxSojourn caps a stay in one channel state (nanoseconds): a century,
// longer than any simulation.
const maxSojourn = float64(100 * 365 * 24 * time.Hour)

// never is a time after every simulated one.
var never = time.Unix(1<<40, 0)

// Loss says how the path to a healthy peer loses probes. The zero value
// loses nothing. At most one of Probe and Packet is set.
type Loss struct {
	// Probe is the probability that a probe fails (--probe-loss): the probe
	// is one unit, its retransmissions ignored.
	Probe float64
	// Packet is the probability that one packet, in either direction, is
	// lost (--packet-loss); UDP retransmissions are modelled.
	Packet float64
	// Burst, when positive, makes the loss correlated (--burst): a
	// Gilbert-Elliott channel whose bad state lasts Burst on average and
	// loses everything, its good state nothing, with the long-run share of
	// bad time equal to the loss probability. Zero: independent losses.
	Burst time.Duration
}

// ErrLoss is wrapped by every error Validate returns.
var ErrLoss = errors.New("invalid loss")

// Validate reports a probability outside [0, 1], both kinds of loss set, or
// a negative burst.
func (l Loss) Validate() error {
	switch {
	case !(l.Probe >= 0 && l.Probe <= 1):
		return fmt.Errorf("%w: probe loss %v is not in [0, 1]", ErrLoss, l.Probe)
	case !(l.Packet >= 0 && l.Packet <= 1):
		return fmt.Errorf("%w: packet loss %v is not in [0, 1]", ErrLoss, l.Packet)
	case l.Probe > 0 && l.Packet > 0:
		return fmt.Errorf("%w: probe loss and packet loss are exclusive", ErrLoss)
	case l.Burst < 0:
		return fmt.Errorf("%w: burst %v is negative", ErrLoss, l.Burst)
	}
	return nil
}

// rate returns the loss probability in use, of a probe or of a packet.
func (l Loss) rate() float64 { return max(l.Probe, l.Packet) }

// peer is one simulated contact and its path: it decides each probe's
// outcome. It answers at once whatever reaches it while alive; it is dead
// in [deadFrom, deadUntil).
type peer struct {
	loss      Loss
	rtt       time.Duration
	rng       *rand.Rand
	ch        *channel // correlated loss; nil when independent
	deadFrom  time.Time
	deadUntil time.Time
	deadSent  int // probes first sent while dead
}

func newPeer(loss Loss, rtt time.Duration, rng *rand.Rand) *peer {
	p := &peer{loss: loss, rtt: rtt, rng: rng, deadFrom: never, deadUntil: never}
	if loss.Burst > 0 {
		p.ch = newChannel(loss.rate(), loss.Burst, rng)
	}
	return p
}

// die makes the peer dead from at on, until revive.
func (p *peer) die(at time.Time) { p.deadFrom, p.deadUntil = at, never }

// revive makes the peer alive again from at on.
func (p *peer) revive(at time.Time) { p.deadUntil = at }

func (p *peer) alive(t time.Time) bool { return t.Before(p.deadFrom) || !t.Before(p.deadUntil) }

// lost reports whether something sent at t is lost with probability rate.
func (p *peer) lost(t time.Time, rate float64) bool {
	if p.ch != nil {
		return p.ch.bad(t)
	}
	return rate > 0 && p.rng.Float64() < rate
}

// probe decides the outcome of a probe first sent at sent with deadline
// timeout, and returns it with the time the probe ends.
func (p *peer) probe(sent time.Time, timeout time.Duration) (qualify.Result, time.Time) {
	if !p.alive(sent) {
		p.deadSent++
	}
	rtt, ok := p.answer(sent, timeout)
	if !ok || rtt >= timeout {
		return qualify.Result{Sent: sent, Reason: qualify.ReasonTimeout}, sent.Add(timeout)
	}
	return qualify.Result{Sent: sent, Code: 200, RTT: rtt}, sent.Add(rtt)
}

// answer returns the RTT of the first answer to a probe sent at sent.
func (p *peer) answer(sent time.Time, timeout time.Duration) (time.Duration, bool) {
	if p.loss.Packet == 0 {
		return p.rtt, p.alive(sent) && !p.lost(sent, p.loss.Probe)
	}
	for off := time.Duration(0); off+p.rtt < timeout; off = nextSend(off) {
		t := sent.Add(off)
		if p.alive(t) && !p.lost(t, p.loss.Packet) && !p.lost(t.Add(p.rtt/2), p.loss.Packet) {
			return off + p.rtt, true
		}
	}
	return 0, false
}

// nextSend returns the offset of the retransmission after the one at off
// (Timer E: 0, 0.5, 1.5, 3.5, 7.5, 11.5 s ...).
func nextSend(off time.Duration) time.Duration {
	interval := T1
	for sent := T1; sent <= off; sent += interval {
		interval = min(2*interval, T2)
	}
	return off + interval
}

// channel is a continuous-time Gilbert-Elliott channel: a two-state Markov
// chain, everything lost in the bad state and nothing in the good one. The
// sojourns are exponential: mean B in the bad state (--burst) and
// B(1-P)/P in the good one, so the share of bad time, hence the loss
// probability of anything sent at a random time, is B/(B + B(1-P)/P) = P.
// It must be asked about times in order.
type channel struct {
	rng       *rand.Rand
	badState  bool
	started   bool      // until is drawn
	until     time.Time // when the current state ends
	meanBad   float64   // nanoseconds
	meanGood  float64   // nanoseconds; +Inf when P = 0
	alwaysBad bool      // P = 1
}

func newChannel(rate float64, burst time.Duration, rng *rand.Rand) *channel {
	c := &channel{rng: rng, meanBad: float64(burst), alwaysBad: rate >= 1}
	c.meanGood = math.Inf(1)
	if rate > 0 {
		c.meanGood = float64(burst) * (1 - rate) / rate
	}
	c.badState = rng.Float64() < rate
	return c
}

// bad reports whether the channel is in the bad state at t.
func (c *channel) bad(t time.Time) bool {
	if c.alwaysBad {
		return true
	}
	if !c.started { // the stationary state at t; sojourns are memoryless
		c.started, c.until = true, t.Add(c.sojourn())
	}
	for !t.Before(c.until) {
		c.badState = !c.badState
		c.until = c.until.Add(c.sojourn())
	}
	return c.badState
}

// sojourn draws the length of a stay in the current state.
func (c *channel) sojourn() time.Duration {
	mean := c.meanGood
	if c.badState {
		mean = c.meanBad
	}
	return time.Duration(min(c.rng.ExpFloat64()*mean, maxSojourn))
}
