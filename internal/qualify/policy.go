package qualify

import (
	"errors"
	"fmt"
	"time"
)

// SIPTransactionTimeout is the deadline used when qualify_timeout <= 0:
// 64*T1 with T1 = 500 ms (RFC 3261 section 17.1.2.2), as Asterisk.
const SIPTransactionTimeout = 64 * 500 * time.Millisecond

// MaxInterval bounds every interval of a Policy (one day), the range of
// Asterisk's qualify_frequency.
const MaxInterval = 86400 * time.Second

// Policy holds one AoR's qualify options. All contacts of the AoR share it,
// by pointer. The zero value is valid: qualify off, one failure, one
// success, and the SIP transaction timeout; DefaultPolicy gives Asterisk's
// configuration defaults instead.
type Policy struct {
	// Frequency (F, qualify_frequency) is the interval between probes of a
	// healthy contact, send to send. Zero turns qualify off. Whole seconds.
	Frequency time.Duration
	// Timeout (T, qualify_timeout) is the deadline of one probe from its
	// first send. Zero or negative means SIPTransactionTimeout.
	Timeout time.Duration
	// Failures (N, qualify_failures) is the number of consecutive failed
	// probes that make a contact Unreachable. Zero means 1. Unused with
	// FailuresAuto.
	Failures int
	// RetryInterval (R, qualify_retry_interval) is the delay from the end of
	// a failed probe to the next one while the contact is suspect, and from
	// the end of a probe while it is recovering. Zero means F, send to send.
	RetryInterval time.Duration
	// DownInterval (D, qualify_down_interval) is the delay from the end of a
	// probe to the next while the contact is Unreachable with no success
	// yet. Zero means the down backoff when R is set (DownStep), else F
	// send to send.
	DownInterval time.Duration
	// Successes (M, qualify_successes) is the number of consecutive
	// successes that make an Unreachable contact Reachable. Zero means 1.
	Successes int
	// Only2xx (qualify_2xx_only) accepts only 2xx final responses.
	Only2xx bool
	// LatencyOnly (qualify_latency_only) measures and reports, but never
	// makes a contact unroutable.
	LatencyOnly bool
	// FailuresAuto (qualify_failures=auto) lets each contact choose its N
	// from its own probe loss (qualify-semantics §5.1).
	FailuresAuto bool
	// FailuresMin and FailuresMax (qualify_failures_min, _max) bound the
	// auto N; zero means DefaultFailuresMin and DefaultFailuresMax.
	FailuresMin, FailuresMax uint8
	// FalseOutagesPerDay (qualify_false_outages_per_day) is the expected
	// false outages a day the auto N is chosen for; zero means
	// DefaultFalseOutagesPerDay.
	FalseOutagesPerDay float64
	// FailureWindow (W, qualify_failure_window) is the time a run of
	// failures must also span, from the end of its first failure to the end
	// of the one that makes the contact Unreachable. Zero: no window.
	FailureWindow time.Duration
	// SuccessCodes (qualify_success_codes) are the final responses that
	// count as a success. Empty: any final response, or a 2xx with
	// Only2xx; the two are exclusive.
	SuccessCodes Codes
	// QuietOnly (qualify_quiet_only) skips a periodic probe of a healthy
	// Reachable contact while the peer gave a final response to a call
	// within the last F (qualify-semantics §11.3).
	QuietOnly bool
	// CallFailureCodes (qualify_call_failure_codes) are the final
	// responses to a call that make a contact suspect; empty means
	// DefaultCallFailureCodes. A 503 with Retry-After is a drain whatever
	// the list holds (§11.4).
	CallFailureCodes Codes
	// DrainMax (qualify_drain_max) bounds the time a peer answering 503
	// with Retry-After is held out of routing; zero means
	// DefaultDrainMax. Whole seconds.
	DrainMax time.Duration
}

// DefaultDrainMax is qualify_drain_max's default.
const DefaultDrainMax = 300 * time.Second

// DefaultCallFailureCodes is qualify_call_failure_codes' default: 503
// without Retry-After, a peer out of service.
var DefaultCallFailureCodes = Codes{r: [MaxCodeRanges]codeRange{{503, 503}}}

// DefaultPolicy returns Asterisk's defaults for an AoR: qualify off,
// qualify_timeout=3.0, and the new options unset.
func DefaultPolicy() Policy {
	return Policy{Timeout: 3 * time.Second, Failures: 1, Successes: 1}
}

// ErrPolicy is wrapped by every error Validate returns.
var ErrPolicy = errors.New("invalid qualify policy")

// Validate reports the first option out of its range, naming the option as
// it is spelled in pjsip.conf.
func (p *Policy) Validate() error {
	switch {
	case p.Frequency < 0 || p.Frequency > MaxInterval:
		return policyErr("qualify_frequency", "must be between 0 and 86400 seconds, got %v", p.Frequency)
	case p.Frequency%time.Second != 0:
		return policyErr("qualify_frequency", "must be whole seconds, got %v", p.Frequency)
	case p.Timeout > MaxInterval:
		return policyErr("qualify_timeout", "must be at most 86400 seconds, got %v", p.Timeout)
	case p.Failures < 0:
		return policyErr("qualify_failures", "must be at least 1, got %d", p.Failures)
	case p.Successes < 0:
		return policyErr("qualify_successes", "must be at least 1, got %d", p.Successes)
	case p.RetryInterval < 0 || p.RetryInterval > MaxInterval:
		return policyErr("qualify_retry_interval", "must be between 0 and 86400 seconds, got %v", p.RetryInterval)
	case p.DownInterval < 0 || p.DownInterval > MaxInterval:
		return policyErr("qualify_down_interval", "must be between 0 and 86400 seconds, got %v", p.DownInterval)
	}
	return p.validateNew()
}

// validateNew checks the options of detection that fits the link.
func (p *Policy) validateNew() error {
	lo, hi := p.failureBounds()
	switch {
	case lo > hi:
		return policyErr("qualify_failures_min", "must be at most qualify_failures_max (%d), got %d", hi, lo)
	case !(p.FalseOutagesPerDay >= 0 && p.FalseOutagesPerDay <= 86400):
		return policyErr("qualify_false_outages_per_day", "must be more than 0 and at most 86400, got %v", p.FalseOutagesPerDay)
	case p.FailureWindow < 0 || p.FailureWindow > MaxInterval:
		return policyErr("qualify_failure_window", "must be between 0 and 86400 seconds, got %v", p.FailureWindow)
	case p.Only2xx && !p.SuccessCodes.Empty():
		return policyErr("qualify_success_codes", "and qualify_2xx_only=yes are exclusive")
	case p.DrainMax < 0 || p.DrainMax > MaxInterval || p.DrainMax%time.Second != 0:
		return policyErr("qualify_drain_max", "must be whole seconds between 1 and 86400, got %v", p.DrainMax)
	}
	return nil
}

func policyErr(option, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrPolicy, option, fmt.Sprintf(format, args...))
}

// Enabled reports whether qualify is on (F > 0).
func (p *Policy) Enabled() bool { return p.Frequency > 0 }

// ProbeTimeout returns the effective deadline of one probe.
func (p *Policy) ProbeTimeout() time.Duration {
	if p.Timeout <= 0 {
		return SIPTransactionTimeout
	}
	return p.Timeout
}

// FailureThreshold returns the effective N (at least 1) of a contact
// without history: with FailuresAuto, the N the prior gives.
func (p *Policy) FailureThreshold() int { return p.FailureThresholdFor(State{}) }

// FailureThresholdFor returns the N in use for a contact in state s: the
// N held by its current run of failures, else the N its next run would
// take (qualify-semantics §5.1).
func (p *Policy) FailureThresholdFor(s State) int {
	switch {
	case !p.FailuresAuto:
		return max(p.Failures, 1)
	case s.Threshold > 0:
		return int(s.Threshold)
	}
	return p.autoThreshold(s)
}

// SuccessThreshold returns the effective M (at least 1).
func (p *Policy) SuccessThreshold() int { return max(p.Successes, 1) }

// EffectiveDownInterval returns the steady delay between the probes of a
// contact that stays down: D, or with D unset and R set the end of the
// down backoff, max(F, R) (DownStep). Zero means the down interval falls
// back to F, send to send.
func (p *Policy) EffectiveDownInterval() time.Duration {
	return p.DownStep(255)
}

// BacksOff reports whether a down contact is probed on the backoff: R set
// and D unset (qualify-semantics §7).
func (p *Policy) BacksOff() bool { return p.DownInterval <= 0 && p.RetryInterval > 0 }

// DownStep returns the delay from the end of a probe to the next for a
// down contact with k failed probes since the one that made it
// Unreachable (State.DownProbes): D when set; else, with R set, the
// backoff R·2^k, capped at max(F, R), so that a dead peer is probed at
// the healthy rate once the backoff ends and a short outage is found over
// soon (qualify-semantics §7); else zero, F send to send.
func (p *Policy) DownStep(k uint8) time.Duration {
	switch {
	case p.DownInterval > 0:
		return p.DownInterval
	case p.RetryInterval <= 0:
		return 0
	}
	limit := max(p.Frequency, p.RetryInterval)
	d := p.RetryInterval
	for ; k > 0 && d < limit; k-- {
		d *= 2
	}
	return min(d, limit)
}

// Routable reports whether a contact in status s may carry calls: any status
// but Unreachable and Removed, and Unreachable too in latency-only mode.
// A draining contact is not routable either: see RoutableState.
func (p *Policy) Routable(s Status) bool {
	switch s {
	case Removed:
		return false
	case Unreachable:
		return p.LatencyOnly
	}
	return true
}

// RoutableState reports whether a contact in state s may carry calls: its
// status is routable and it is not draining, or the AoR is latency-only.
func (p *Policy) RoutableState(s State) bool {
	return p.Routable(s.Status) && (!s.Draining || p.LatencyOnly)
}

// Judge classifies one probe result: a success, a drain (a 503 with
// Retry-After: ReasonDraining, no failure), or a failure with its
// reason. Provisional responses never reach it; any final response is a
// success, or only those of SuccessCodes, or only a 2xx with Only2xx.
func (p *Policy) Judge(r Result) (ok bool, reason Reason) {
	if r.Reason != ReasonNone {
		return false, r.Reason
	}
	if r.Code < 200 {
		// No final response, yet no reason: treat as the prober running out
		// of time, never as a success.
		return false, ReasonTimeout
	}
	if r.Draining() {
		return false, ReasonDraining
	}
	if !p.accepts(r.Code) {
		return false, ReasonStatus
	}
	return true, ReasonNone
}

// accepts reports whether a final response with code is a success.
func (p *Policy) accepts(code int) bool {
	switch {
	case !p.SuccessCodes.Empty():
		return p.SuccessCodes.Contains(code)
	case p.Only2xx:
		return code < 300
	}
	return true
}

// Settings are a policy's values as operators read them, every default and
// fallback resolved: what check-config and the API report.
type Settings struct {
	Frequency     time.Duration // F; 0 when qualify is off
	Timeout       time.Duration // T, SIPTransactionTimeout when unset
	Failures      int           // N, of a contact without history with FailuresAuto
	RetryInterval time.Duration // R, or F when unset
	DownInterval  time.Duration // D, or the backoff's end max(F, R) with R set, or F
	// DownBackoff reports that a down contact is probed on the backoff
	// from R to DownInterval (D unset, R set).
	DownBackoff bool
	Successes   int // M
	Only2xx     bool
	LatencyOnly bool
	// FailuresAuto, with its bounds and target resolved; the three are zero
	// without it.
	FailuresAuto             bool
	FailuresMin, FailuresMax int
	FalseOutagesPerDay       float64
	FailureWindow            time.Duration // W; 0 when off
	SuccessCodes             string        // as ParseCodes reads it; "" when unset
	QuietOnly                bool
	CallFailureCodes         string        // as ParseCodes reads it; "" when unset (503)
	DrainMax                 time.Duration // 0 when unset (DefaultDrainMax)
}

// Effective returns the policy's resolved settings.
func (p *Policy) Effective() Settings {
	orF := func(d time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return p.Frequency
	}
	s := Settings{
		Frequency: p.Frequency, Timeout: p.ProbeTimeout(),
		Failures: p.FailureThreshold(), RetryInterval: orF(p.RetryInterval),
		DownInterval: orF(p.EffectiveDownInterval()), DownBackoff: p.BacksOff(),
		Successes: p.SuccessThreshold(), Only2xx: p.Only2xx, LatencyOnly: p.LatencyOnly,
		FailureWindow: p.FailureWindow, SuccessCodes: p.SuccessCodes.String(),
		QuietOnly: p.QuietOnly, CallFailureCodes: p.CallFailureCodes.String(), DrainMax: p.DrainMax,
	}
	if p.FailuresAuto {
		s.FailuresAuto, s.FalseOutagesPerDay = true, p.falseOutageTarget()
		s.FailuresMin, s.FailuresMax = p.failureBounds()
	}
	return s
}

// Report is Effective in the units and names of pjsip.conf: seconds, with
// the option names as JSON keys; the options of qualify_failures=auto,
// the window, the success codes and the options of calls as evidence only
// when set. It is what check-config
// --json and the API print for a policy.
type Report struct {
	Frequency          float64 `json:"qualify_frequency"`
	Timeout            float64 `json:"qualify_timeout"`
	Failures           int     `json:"qualify_failures"`
	RetryInterval      float64 `json:"qualify_retry_interval"`
	DownInterval       float64 `json:"qualify_down_interval"`
	DownBackoff        bool    `json:"qualify_down_backoff,omitempty"`
	Successes          int     `json:"qualify_successes"`
	Only2xx            bool    `json:"qualify_2xx_only"`
	LatencyOnly        bool    `json:"qualify_latency_only"`
	FailuresAuto       bool    `json:"qualify_failures_auto,omitempty"`
	FailuresMin        int     `json:"qualify_failures_min,omitempty"`
	FailuresMax        int     `json:"qualify_failures_max,omitempty"`
	FalseOutagesPerDay float64 `json:"qualify_false_outages_per_day,omitempty"`
	FailureWindow      float64 `json:"qualify_failure_window,omitempty"`
	SuccessCodes       string  `json:"qualify_success_codes,omitempty"`
	QuietOnly          bool    `json:"qualify_quiet_only,omitempty"`
	CallFailureCodes   string  `json:"qualify_call_failure_codes,omitempty"`
	DrainMax           float64 `json:"qualify_drain_max,omitempty"`
}

// Report returns the policy's effective settings in seconds.
func (p *Policy) Report() Report {
	e := p.Effective()
	return Report{
		Frequency: e.Frequency.Seconds(), Timeout: e.Timeout.Seconds(),
		Failures: e.Failures, RetryInterval: e.RetryInterval.Seconds(),
		DownInterval: e.DownInterval.Seconds(), DownBackoff: e.DownBackoff, Successes: e.Successes,
		Only2xx: e.Only2xx, LatencyOnly: e.LatencyOnly,
		FailuresAuto: e.FailuresAuto, FailuresMin: e.FailuresMin, FailuresMax: e.FailuresMax,
		FalseOutagesPerDay: e.FalseOutagesPerDay, FailureWindow: e.FailureWindow.Seconds(),
		SuccessCodes: e.SuccessCodes,
		QuietOnly:    e.QuietOnly, CallFailureCodes: e.CallFailureCodes, DrainMax: e.DrainMax.Seconds(),
	}
}
