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
	// MeanFalseOutageSeconds is S_D - T + RTT plus the recovery's wait
	// (see recovery): S_D/(1-p) - T + RTT for M = 1.
	MeanFalseOutageSeconds float64
	// UnavailableFraction is the share of time a healthy peer is wrongly
	// unroutable; zero with qualify_latency_only.
	UnavailableFraction float64
	// ProbesPerHourHealthy is 3600 E[probes per cycle] / E[L].
	ProbesPerHourHealthy float64
	// ProbesPerHourDown is the steady rate while the peer is dead, 3600/S_D.
	ProbesPerHourDown float64
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
	// length, S_D^2 p / (1-p)^2, in s^2.
	OutageDurationVariance float64
}

// steps returns S_R and S_D, send to send after a failed probe while
// suspect and while Unreachable: T plus R (or D) when set, else F's
// rhythm, never before the probe's deadline.
func steps(p qualify.Policy) (retry, down time.Duration) {
	t := p.ProbeTimeout()
	retry, down = max(p.Frequency, t), max(p.Frequency, t)
	if p.RetryInterval > 0 {
		retry = t + p.RetryInterval
	}
	if d := p.EffectiveDownInterval(); d > 0 {
		down = t + d
	}
	return retry, down
}

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
	sr, sd := steps(p)
	retry, down, t := sr.Seconds(), sd.Seconds(), p.ProbeTimeout().Seconds()
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
		for g := 1; pk > 1e-300 && g < 1e7; g++ {
			c := cycle{prob: pk * q, length: float64(n-1)*retry + float64(g)*down + f,
				probes: float64(n + g), outage: 1, down: float64(g)*down - t + rtt}
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
	q := 1 - loss
	w, _ := recovery(p, loss, rtt.Seconds())
	x.MeanFalseOutageSeconds = sd.Seconds() - t + w + rtt.Seconds()
	x.OutageDurationVariance = sd.Seconds() * sd.Seconds() * loss / (q * q)
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
// that one included. With k successes so far, the time to go is
//
//	W_k = q (S_S + W_{k+1}) + p (S_D + W_0), W_M = 0 with no S_S,
//
// S_S the step after a success while recovering (RTT + R, or F): each
// W_k = a_k + b_k W_0, solved from k = M-1 down. For M = 1 it is p S_D/q
// and 1/q probes.
func recovery(p qualify.Policy, loss, rtt float64) (wait, probes float64) {
	q := 1 - loss
	_, sd := steps(p)
	down, success := sd.Seconds(), max(p.Frequency.Seconds(), rtt)
	if p.RetryInterval > 0 {
		success = rtt + p.RetryInterval.Seconds()
	}
	var a, b, pa, pb float64 // W_{k+1} = a + b W_0, P_{k+1} = pa + pb P_0
	for k := p.SuccessThreshold() - 1; k >= 0; k-- {
		step, next, nextP := success, a, pa
		if k == p.SuccessThreshold()-1 {
			step, next, nextP, b, pb = 0, 0, 0, 0, 0
		}
		a, b = q*(step+next)+loss*down, q*b+loss
		pa, pb = 1+q*nextP, q*pb+loss
	}
	return a / (1 - b), pa / (1 - pb)
}
