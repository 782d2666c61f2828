package simulate

import (
	"iter"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Expected is what the closed forms of the package doc predict for one
// policy when each probe fails independently with probability p < 1 and
// qualify_successes is 1. Times are seconds.
type Expected struct {
	// FalseOutagesPerDay is 86400 p^N / E[L].
	FalseOutagesPerDay float64
	// MeanFalseOutageSeconds is S_D(0) - T + RTT plus the recovery's
	// wait (see recovery): sum_j S_D(j) p^j - T + RTT for M = 1, S_D/(1-p)
	// - T + RTT without the down backoff.
	MeanFalseOutageSeconds float64
	// UnavailableFraction is the share of time a healthy peer is wrongly
	// unroutable; zero with qualify_latency_only.
	UnavailableFraction float64
	// ProbesPerHourHealthy is 3600 E[probes per cycle] / E[L].
	ProbesPerHourHealthy float64
	// ProbesPerHourDown is the steady rate while the peer is dead, once
	// the down backoff has ended: 3600/S_D(∞).
	ProbesPerHourDown float64
	// DatagramsPerMinuteDown is the same rate in UDP datagrams: each probe
	// of a dead peer is sent, then retransmitted T1, 3·T1, ... after its
	// first send (the interval doubling up to T2) while within T.
	DatagramsPerMinuteDown float64
	// DetectionWorstSeconds is F + T + (N-1) S_R: an outage that begins
	// just after a successful probe's send.
	DetectionWorstSeconds float64
	// DetectionMeanSeconds is F/2 + T + (N-1) S_R, for a death at a
	// uniformly random moment of a lossless healthy run.
	DetectionMeanSeconds float64
	// DetectionFromFirstFailureSeconds is T + (N-1) S_R.
	DetectionFromFirstFailureSeconds float64

	// OutageVariance and ProbeVariance are the asymptotic variances per
	// second of the number of false outages and of probes in a long
	// healthy run (renewal-reward central limit theorem: a run of t
	// seconds has variance t times these).
	OutageVariance, ProbeVariance float64
	// UnavailableVariance is the same for the unroutable time, in s^2/s.
	UnavailableVariance float64
	// OutageDurationVariance is the variance of one false outage's
	// length in s^2: S_D^2 p / (1-p)^2 without the down backoff.
	OutageDurationVariance float64
}

// steps returns S_R and S_D(∞), send to send after a failed probe while
// suspect and while Unreachable once the down backoff has ended: T plus
// R (or the down interval) when set, else F's rhythm, never before the
// probe's deadline.
func steps(p qualify.Policy) (retry, down time.Duration) {
	t := p.ProbeTimeout()
	retry = max(p.Frequency, t)
	if p.RetryInterval > 0 {
		retry = t + p.RetryInterval
	}
	return retry, downStep(p, 255)
}

// downStep returns S_D(k), send to send after a failed probe of a down
// contact with k failed probes since the one that made it Unreachable
// (qualify.State.DownProbes after it): T plus Policy.DownStep(k), or F's
// rhythm when that is zero.
func downStep(p qualify.Policy, k uint8) time.Duration {
	if d := p.DownStep(k); d > 0 {
		return p.ProbeTimeout() + d
	}
	return max(p.Frequency, p.ProbeTimeout())
}

// downSteps returns S_D(j) in seconds for j = 0 up to the first j at
// which the backoff has ended, S_D(j) = S_D(∞): the last element stands
// for every later j.
func downSteps(p qualify.Policy) []float64 {
	end := downStep(p, 255)
	var out []float64
	for k := uint8(0); ; k++ {
		d := downStep(p, k)
		out = append(out, d.Seconds())
		if d == end {
			return out
		}
	}
}

// at returns steps[j], the last element for j past the end.
func at(steps []float64, j int) float64 { return steps[min(j, len(steps)-1)] }

// WorstDetection returns F + T + (K-1) S_R, the longest time from a peer's
// death to its contact becoming Unreachable (K: DetectingFailures).
func WorstDetection(p qualify.Policy) time.Duration {
	retry, _ := steps(p)
	return p.Frequency + p.ProbeTimeout() + time.Duration(DetectingFailures(p)-1)*retry
}

// DetectingFailures returns K, the failure that makes a dead peer's
// contact Unreachable: the N-th, or with a window W the first whose end
// is W after the first one's, max(N, 1 + ceil(W / S_R)) as failures end
// S_R apart. With qualify_failures=auto, N is qualify_failures_max, the
// worst case.
func DetectingFailures(p qualify.Policy) int {
	n := p.FailureThreshold()
	if p.FailuresAuto {
		n = p.Effective().FailuresMax
	}
	if p.FailureWindow <= 0 {
		return n
	}
	retry, _ := steps(p)
	return max(n, 1+int((p.FailureWindow+retry-1)/retry))
}

// cycle is one outcome of a renewal cycle: from a probe sent while the
// contact is healthy to the next such probe.
type cycle struct {
	prob   float64
	length float64 // seconds
	probes float64
	outage float64 // 1 when the cycle holds a false outage
	down   float64 // seconds the contact was Unreachable
}

// cycles enumerates the outcomes of a cycle under independent probe loss
// p < 1: k < N failures then a success, or N failures and g >= 1 probes
// while Unreachable, the last a success. The geometric tail is cut where
// its probability is negligible. With M > 1 the outage is one outcome
// with its expected length (see recovery): the means stay exact, the
// variances ignore the spread of the recovery.
func cycles(p qualify.Policy, loss, rtt float64) iter.Seq[cycle] {
	q, n, f := 1-loss, DetectingFailures(p), p.Frequency.Seconds()
	sr, _ := steps(p)
	sd := downSteps(p)
	retry, down, t := sr.Seconds(), sd[0], p.ProbeTimeout().Seconds()
	return func(yield func(cycle) bool) {
		pk := 1.0
		for k := range n {
			if !yield(cycle{prob: pk * q, length: float64(k)*retry + f, probes: float64(k + 1)}) {
				return
			}
			pk *= loss
		}
		if p.SuccessThreshold() > 1 {
			w, probes := recovery(p, loss, rtt)
			yield(cycle{prob: pk, length: float64(n-1)*retry + down + w + f, probes: float64(n) + probes,
				outage: 1, down: down - t + w + rtt})
			return
		}
		spent := 0.0 // S_D(0) + ... + S_D(g-1)
		for g := 1; pk > 1e-300 && g < 1e7; g++ {
			spent += at(sd, g-1)
			c := cycle{prob: pk * q, length: float64(n-1)*retry + spent + f,
				probes: float64(n + g), outage: 1, down: spent - t + rtt}
			if !yield(c) {
				return
			}
			pk *= loss
		}
	}
}

// Predict returns the closed forms for policy p under independent probe
// loss, with the path's round-trip time rtt. Loss must be below 1.
func Predict(p qualify.Policy, loss float64, rtt time.Duration) Expected {
	var el, eprobes, eout, edown float64
	for c := range cycles(p, loss, rtt.Seconds()) {
		el += c.prob * c.length
		eprobes += c.prob * c.probes
		eout += c.prob * c.outage
		edown += c.prob * c.down
	}
	var x Expected
	x.FalseOutagesPerDay = 86400 * eout / el
	x.ProbesPerHourHealthy = 3600 * eprobes / el
	if !p.LatencyOnly {
		x.UnavailableFraction = edown / el
	}
	x.OutageVariance = rewardVariance(p, loss, rtt, el, eout/el, func(c cycle) float64 { return c.outage })
	x.ProbeVariance = rewardVariance(p, loss, rtt, el, eprobes/el, func(c cycle) float64 { return c.probes })
	if !p.LatencyOnly {
		x.UnavailableVariance = rewardVariance(p, loss, rtt, el, edown/el, func(c cycle) float64 { return c.down })
	}
	x.detection(p, loss, rtt)
	return x
}

// detection fills the detection times, the outage length and the dead
// probe rate.
func (x *Expected) detection(p qualify.Policy, loss float64, rtt time.Duration) {
	sr, sd := steps(p)
	t, f := p.ProbeTimeout().Seconds(), p.Frequency.Seconds()
	x.DetectionFromFirstFailureSeconds = t + float64(DetectingFailures(p)-1)*sr.Seconds()
	x.DetectionWorstSeconds = f + x.DetectionFromFirstFailureSeconds
	x.DetectionMeanSeconds = f/2 + x.DetectionFromFirstFailureSeconds
	x.ProbesPerHourDown = 3600 / sd.Seconds()
	x.DatagramsPerMinuteDown = 60 * float64(Transmissions(p.ProbeTimeout())) / sd.Seconds()
	w, _ := recovery(p, loss, rtt.Seconds())
	d := downSteps(p)
	x.MeanFalseOutageSeconds = d[0] - t + w + rtt.Seconds()
	x.OutageDurationVariance = outageVariance(d, loss)
}

// Transmissions returns how many times a UDP probe that gets no answer
// is sent within its deadline t: at once, then on Timer E (nextSend).
func Transmissions(t time.Duration) int {
	n := 0
	for off := time.Duration(0); off < t; off = nextSend(off) {
		n++
	}
	return n
}

// outageVariance returns the variance of S_D(0) + ... + S_D(G-1), G the
// number of probes of a down spell with M = 1: P(G = g) = p^(g-1) (1-p).
func outageVariance(sd []float64, loss float64) float64 {
	var m1, m2, spent float64
	pk := 1.0
	for g := 1; pk > 1e-300 && g < 1e7; g++ {
		spent += at(sd, g-1)
		m1 += pk * (1 - loss) * spent
		m2 += pk * (1 - loss) * spent * spent
		pk *= loss
	}
	return m2 - m1*m1
}

// rewardVariance returns E[(Y - rate L)^2] / E[L] for the per-cycle reward
// Y, the asymptotic variance per second of its total.
func rewardVariance(p qualify.Policy, loss float64, rtt time.Duration, el, rate float64, y func(cycle) float64) float64 {
	var v float64
	for c := range cycles(p, loss, rtt.Seconds()) {
		d := y(c) - rate*c.length
		v += c.prob * d * d
	}
	return v / el
}

// recovery returns, under independent probe loss, the expected time from
// the first probe sent while Unreachable to the send of the M-th
// consecutive success that ends the outage, and the probes sent in it,
// that one included. With k successes so far and j failed probes since
// the contact went down, the time to go is
//
//	W_{k,j} = q (S_S + W_{k+1,j}) + p (S_D(j+1) + W_{0,j+1}), W_{M,j} = 0 with no S_S,
//
// S_S the step after a success while recovering (RTT + R, or F), and
// S_D(j) the down backoff's step, constant from some J on (downSteps).
// For each j, W_{k,j} = a_k + b W_{0,j+1} is solved from k = M-1 down,
// b the same for every j; W_{0,J} = a_0/(1-b), and W_{0,j} from j = J-1
// down to the W_{0,0} returned. For M = 1 without the backoff it is
// p S_D/q, and always 1/q probes.
func recovery(p qualify.Policy, loss, rtt float64) (wait, probes float64) {
	q, sd := 1-loss, downSteps(p)
	success := max(p.Frequency.Seconds(), rtt)
	if p.RetryInterval > 0 {
		success = rtt + p.RetryInterval.Seconds()
	}
	level := func(down float64) (a, b, pa, pb float64) { // W_{0,j} = a + b W_{0,j+1}
		for k := p.SuccessThreshold() - 1; k >= 0; k-- {
			step, next, nextP := success, a, pa
			if k == p.SuccessThreshold()-1 {
				step, next, nextP, b, pb = 0, 0, 0, 0, 0
			}
			a, b = q*(step+next)+loss*down, q*b+loss
			pa, pb = 1+q*nextP, q*pb+loss
		}
		return a, b, pa, pb
	}
	last := len(sd) - 1
	a, b, pa, pb := level(sd[last])
	wait, probes = a/(1-b), pa/(1-pb)
	for j := last - 1; j >= 0; j-- {
		a, b, _, _ = level(at(sd, j+1))
		wait = a + b*wait
	}
	return wait, probes
}
