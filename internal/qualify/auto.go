package qualify

import "time"

// Defaults of qualify_failures=auto (qualify-semantics §5.1).
const (
	DefaultFailuresMin        = 1
	DefaultFailuresMax        = 8
	DefaultFalseOutagesPerDay = 0.01
)

// The prior of the auto threshold's loss estimate: Beta(priorLost,
// priorProbes - priorLost), mean 1%, worth 100 probes. A contact without
// history starts at N = 3 whenever 8.64 s < F <= 864 s under the default
// target, since (86400/F) 0.01^3 < 0.01 <= (86400/F) 0.01^2 there.
const (
	priorLost   = 1.0
	priorProbes = 100.0
)

// lossHorizon bounds the probes the estimate counts: when State.Answered
// + State.Lost reach it both halve, so the estimate weighs roughly the
// last lossHorizon probes (11 days at F = 30 s) and follows a link whose
// loss changes, while its counts never overflow.
const lossHorizon = 1 << 15

// failureBounds returns the auto threshold's range [min, max].
func (p *Policy) failureBounds() (lo, hi int) {
	lo, hi = int(p.FailuresMin), int(p.FailuresMax)
	if lo == 0 {
		lo = DefaultFailuresMin
	}
	if hi == 0 {
		hi = DefaultFailuresMax
	}
	return lo, hi
}

// falseOutageTarget returns qualify_false_outages_per_day.
func (p *Policy) falseOutageTarget() float64 {
	if p.FalseOutagesPerDay > 0 {
		return p.FalseOutagesPerDay
	}
	return DefaultFalseOutagesPerDay
}

// LossEstimate returns the posterior mean of the contact's probe loss from
// the counts in s: (priorLost + Lost) / (priorProbes + Answered + Lost).
func LossEstimate(s State) float64 {
	return (priorLost + float64(s.Lost)) / (priorProbes + float64(s.Answered) + float64(s.Lost))
}

// autoThreshold returns the N a run of failures beginning in state s
// takes: ThresholdAt the contact's loss estimate.
func (p *Policy) autoThreshold(s State) int { return p.ThresholdAt(LossEstimate(s)) }

// ThresholdAt returns the smallest N in [qualify_failures_min,
// qualify_failures_max] whose expected false outages, (86400/F) loss^N a
// day for independent probe loss, stay under qualify_false_outages_per_day;
// the maximum when none does.
func (p *Policy) ThresholdAt(loss float64) int {
	lo, hi := p.failureBounds()
	if !p.Enabled() {
		return lo
	}
	perDay, target := float64(24*time.Hour)/float64(p.Frequency), p.falseOutageTarget()
	pn := 1.0
	for n := 1; n < hi; n++ {
		pn *= loss
		if n >= lo && perDay*pn < target {
			return n
		}
	}
	return hi
}

// learn adds one probe observed while Reachable to the estimate: a success
// and the failures of the run it ends. The failures of a run that makes
// the contact Unreachable are never added, as the peer may have died.
func (p *Policy) learn(s State) State {
	if !p.FailuresAuto {
		return s
	}
	s.Answered++
	s.Lost += s.Failures
	if s.Answered+s.Lost >= lossHorizon {
		s.Answered, s.Lost = s.Answered/2, s.Lost/2
	}
	return s
}
