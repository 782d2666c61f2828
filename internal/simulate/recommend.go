package simulate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Bounds are what an operator asks of a policy under independent probe
// loss.
type Bounds struct {
	// Loss is the probe loss probability, below 1.
	Loss float64
	// DetectWithin bounds the worst detection time.
	DetectWithin time.Duration
	// MaxProbesPerHour bounds the probe rate to a healthy and to a dead
	// peer; zero means no bound.
	MaxProbesPerHour float64
}

// Candidate is one setting of the search with its closed forms.
type Candidate struct {
	Policy   qualify.Policy
	Expected Expected
}

// The search grid: qualify_failures up to maxFailures, and these retry
// and down intervals (zero: unset) and frequencies.
var (
	maxFailures   = 8
	retryGrid     = []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second}
	downGrid      = []time.Duration{0, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second, 120 * time.Second}
	frequencyGrid = []time.Duration{300 * time.Second, 120 * time.Second, 90 * time.Second, 60 * time.Second, 45 * time.Second, 30 * time.Second, 20 * time.Second, 15 * time.Second, 10 * time.Second, 5 * time.Second, 2 * time.Second, time.Second}
)

// ErrNoSetting is returned by Recommend when nothing in its grid meets
// the bounds.
var ErrNoSetting = errors.New("no setting meets the bounds")

// ErrBounds is returned by Recommend for a loss outside [0, 1) or a
// detection bound that is not positive.
var ErrBounds = errors.New("invalid bounds")

// Recommend searches qualify_failures, qualify_retry_interval and
// qualify_down_interval for the settings that meet b with the fewest false
// outages a day (then the shortest worst detection, then the fewest
// probes), keeping base's frequency unless no setting meets b with it, in
// which case it tries lower ones. The down interval is the shortest that
// keeps the dead probe rate within bounds: it only trades recovery time for
// load; with a retry interval, unset (the down backoff, which ends at F's
// rate) is tried first and is the gentlest. It returns the winner first, then the best candidate for each
// other qualify_failures at the same frequency, by qualify_failures. The
// candidates have a fixed N, no window, and base's qualify_successes and
// other options. The closed forms prune the search; confirm the winner
// with Run.
func Recommend(base qualify.Policy, b Bounds) ([]Candidate, error) {
	if !(b.Loss >= 0 && b.Loss < 1) || b.DetectWithin <= 0 {
		return nil, fmt.Errorf("%w: loss must be in [0, 1) and the detection bound positive", ErrBounds)
	}
	for _, f := range frequencies(base.Frequency) {
		base.Frequency = f
		if best := bestPerFailures(base, b); len(best) > 0 {
			return winnerFirst(best), nil
		}
	}
	return nil, fmt.Errorf("%w: detection within %v at %v probe loss, timeout %v", ErrNoSetting, b.DetectWithin, b.Loss, base.ProbeTimeout())
}

// frequencies returns f, then the grid's lower frequencies.
func frequencies(f time.Duration) []time.Duration {
	if f <= 0 {
		f = 60 * time.Second
	}
	out := []time.Duration{f}
	for _, g := range frequencyGrid {
		if g < f {
			out = append(out, g)
		}
	}
	return out
}

// bestPerFailures returns, for each qualify_failures with a setting that
// meets b, its best setting.
func bestPerFailures(base qualify.Policy, b Bounds) []Candidate {
	var out []Candidate
	for n := 1; n <= maxFailures; n++ {
		var best *Candidate
		for _, r := range retryGrid {
			c, ok := candidate(base, n, r, b)
			if ok && (best == nil || better(c, *best)) {
				best = &c
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	return out
}

// candidate returns the setting with n and r, and the shortest down
// interval that meets b; false when none does.
func candidate(base qualify.Policy, n int, r time.Duration, b Bounds) (Candidate, bool) {
	if r >= base.Frequency || (n == 1 && r > 0) {
		return Candidate{}, false // a retry slower than F, or unused
	}
	p := base
	p.Failures, p.RetryInterval, p.Successes = n, r, base.SuccessThreshold()
	p.FailuresAuto, p.FailuresMin, p.FailuresMax, p.FailureWindow = false, 0, 0, 0
	if WorstDetection(p) > b.DetectWithin {
		return Candidate{}, false
	}
	for _, d := range downGrid {
		if d > 0 && (d >= p.Frequency || (r > 0 && d <= r)) {
			continue // unset already covers D = F, or the backoff from R to F
		}
		p.DownInterval = d
		x := Predict(p, b.Loss, DefaultRTT)
		if b.MaxProbesPerHour <= 0 || max(x.ProbesPerHourHealthy, x.ProbesPerHourDown) <= b.MaxProbesPerHour {
			return Candidate{Policy: p, Expected: x}, true
		}
	}
	return Candidate{}, false
}

// better ranks a before b: fewer false outages, faster detection, fewer
// probes.
func better(a, b Candidate) bool {
	x, y := a.Expected, b.Expected
	if c := cmp.Compare(x.FalseOutagesPerDay, y.FalseOutagesPerDay); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(x.DetectionWorstSeconds, y.DetectionWorstSeconds); c != 0 {
		return c < 0
	}
	return x.ProbesPerHourHealthy < y.ProbesPerHourHealthy
}

// winnerFirst moves the best candidate to the front.
func winnerFirst(cs []Candidate) []Candidate {
	i := 0
	for j := range cs {
		if better(cs[j], cs[i]) {
			i = j
		}
	}
	return append([]Candidate{cs[i]}, slices.Delete(slices.Clone(cs), i, i+1)...)
}
