package simulate

import (
	"math"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// CleanLoss is the probe loss of a clean link, where qualify_failures=auto
// shows its speed: 0.1%.
const CleanLoss = 0.001

// Alternative is a setting proposed beside Recommend's winner: the
// winner's with qualify_failures=auto, or with a failure window.
type Alternative struct {
	Policy qualify.Policy
	// N is the failure threshold the setting holds at the bounds' loss, and
	// Expected its closed forms there; CleanN and Clean the same at
	// CleanLoss.
	N, CleanN       int
	Expected, Clean Expected
}

// MaxFailuresWithin returns the largest N whose worst detection with p's
// other options stays within bound, up to maxFailures; 0 when none does.
func MaxFailuresWithin(p qualify.Policy, bound time.Duration) int {
	p.FailuresAuto, p.FailureWindow = false, 0
	for n := maxFailures; n >= 1; n-- {
		p.Failures = n
		if WorstDetection(p) <= bound {
			return n
		}
	}
	return 0
}

// ProposeAuto returns the winner's setting with qualify_failures=auto,
// its maximum the largest N that keeps the detection bound, when the
// numbers say so: at the bounds' loss auto's N meets its false-outage
// target within that maximum, and on a clean link it holds a smaller N
// than the winner, so it detects a dead peer faster there.
func ProposeAuto(win qualify.Policy, b Bounds) (Alternative, bool) {
	hi := MaxFailuresWithin(win, b.DetectWithin)
	if hi == 0 || hi > math.MaxUint8 {
		return Alternative{}, false
	}
	p := win
	p.FailuresAuto, p.Failures, p.FailuresMax = true, 0, uint8(hi)
	a := Alternative{Policy: p, N: p.ThresholdAt(b.Loss), CleanN: p.ThresholdAt(CleanLoss)}
	perDay := 86400 / p.Frequency.Seconds()
	if perDay*math.Pow(b.Loss, float64(a.N)) >= p.Effective().FalseOutagesPerDay || a.CleanN >= win.FailureThreshold() {
		return Alternative{}, false
	}
	a.Expected, a.Clean = predictFixed(p, a.N, b.Loss), predictFixed(p, a.CleanN, CleanLoss)
	return a, true
}

// predictFixed returns the closed forms of p holding N = n.
func predictFixed(p qualify.Policy, n int, loss float64) Expected {
	p.FailuresAuto, p.Failures = false, n
	return Predict(p, loss, DefaultRTT)
}

// WindowFor returns the failure window proposed for p holding N = n
// against loss bursts of mean length burst: the smallest multiple of S_R
// of at least two bursts (an exponential burst outlasts it with
// probability e^-2), if it is longer than the (n-1) S_R it would
// otherwise not act under and keeps the worst detection within bound;
// zero if not.
func WindowFor(p qualify.Policy, n int, burst, bound time.Duration) time.Duration {
	retry, _ := steps(p)
	w := time.Duration(math.Ceil(float64(2*burst)/float64(retry))) * retry
	p.FailureWindow = w
	if burst <= 0 || w <= time.Duration(n-1)*retry || WorstDetection(p) > bound {
		return 0
	}
	return w
}
