package simulate

import (
	"math"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// autoPolicy is the reference policy with qualify_failures=auto and its defaults.
func autoPolicy() qualify.Policy {
	p := reference()
	p.Failures, p.FailuresAuto = 0, true
	return p
}

// windowPolicy is the reference policy with qualify_failure_window=w.
func windowPolicy(w time.Duration) qualify.Policy {
	p := reference()
	p.FailureWindow = w
	return p
}

// TestAutoNoMoreFalseOutages checks qualify-semantics §5.1 in the real engine: at 1%, 5% and
// 20% independent probe loss, auto has at most the reference policy's false outages. At 1%
// both mostly hold N = 3, so auto is held to the reference's closed form within z sigma.
func TestAutoNoMoreFalseOutages(t *testing.T) {
	for _, loss := range []float64{0.01, 0.05, 0.2} {
		cfg := Config{Loss: Loss{Probe: loss}, Days: 200, Trials: 1, Seed: 11}
		a, ref := runOne(t, autoPolicy(), cfg), runOne(t, reference(), cfg)
		x := Predict(reference(), loss, DefaultRTT)
		bound := x.FalseOutagesPerDay*cfg.Days + z*math.Sqrt(x.OutageVariance*cfg.Days*86400)
		if float64(a.FalseOutages) > bound || loss > 0.01 && a.FalseOutages >= ref.FalseOutages {
			t.Errorf("loss %g: auto %d false outages, reference %d (closed form %.3g, bound %.3g)",
				loss, a.FalseOutages, ref.FalseOutages, x.FalseOutagesPerDay*cfg.Days, bound)
		}
	}
}

// TestAutoDetectsFasterOnCleanLink checks qualify-semantics §5.1 and §7: at 0.1% loss the
// deaths come after a healthy spell the contact learned from, so auto holds N = 2 and detects
// within F + T + (R + T) = 38 s, where the reference needs up to 43 s.
func TestAutoDetectsFasterOnCleanLink(t *testing.T) {
	cfg := Config{Loss: Loss{Probe: 0.001}, Days: 1, Trials: 300, Seed: 5}
	a, ref := runOne(t, autoPolicy(), cfg), runOne(t, reference(), cfg)
	if a.DetectionWorstSeconds > 38 || a.DetectionMeanSeconds >= ref.DetectionMeanSeconds || a.DetectionWorstSeconds >= ref.DetectionWorstSeconds {
		t.Fatalf("auto detects in %.1f s worst, %.1f s mean; reference %.1f s, %.1f s",
			a.DetectionWorstSeconds, a.DetectionMeanSeconds, ref.DetectionWorstSeconds, ref.DetectionMeanSeconds)
	}
	// From the first failure N = 2 takes T + (R + T) = 8 s; without the warm-up the prior's
	// N = 3 holds the first death, T + 2 (R + T) = 13 s.
	cold := runOne(t, autoPolicy(), Config{Loss: cfg.Loss, Days: 1, Trials: 1, Seed: 5, WarmUp: -1})
	if a.DetectionFromFirstFailureWorstSeconds > 8 || cold.DetectionFromFirstFailureWorstSeconds < 13 {
		t.Fatalf("from the first failure: %.1f s after the warm-up, %.1f s without; want 8 and 13",
			a.DetectionFromFirstFailureWorstSeconds, cold.DetectionFromFirstFailureWorstSeconds)
	}
}

// TestWindowCutsBurstOutages checks qualify-semantics §7: under 10 s bursts of 5% loss,
// three failures R apart fit in one burst far more often than five do, so a 20 s window cuts
// the false outages; its worst detection is F + T + 4 (R + T) = 53 s, the closed form.
func TestWindowCutsBurstOutages(t *testing.T) {
	cfg := Config{Loss: Loss{Probe: 0.05, Burst: 10 * time.Second}, Days: 100, Trials: 200, Seed: 3}
	w, ref := runOne(t, windowPolicy(20*time.Second), cfg), runOne(t, reference(), cfg)
	if ref.FalseOutages < 1000 || 2*w.FalseOutages >= ref.FalseOutages {
		t.Errorf("false outages: window %d, reference %d; want the window below half", w.FalseOutages, ref.FalseOutages)
	}
	worst := WorstDetection(windowPolicy(20 * time.Second)).Seconds()
	if worst != 53 || w.DetectionWorstSeconds > worst || w.DetectionWorstSeconds < worst-5 {
		t.Errorf("worst detection %.1f s, closed form %.1f s (want 53)", w.DetectionWorstSeconds, worst)
	}
}

// TestShortWindowChangesNothing checks qualify-semantics §7: a window of (N-1)(R+T) = 10 s
// acts not, so the engine makes the same run as without one.
func TestShortWindowChangesNothing(t *testing.T) {
	cfg := Config{Loss: Loss{Probe: 0.2}, Days: 20, Trials: 50, Seed: 9}
	w, ref := runOne(t, windowPolicy(10*time.Second), cfg), runOne(t, reference(), cfg)
	w.Name, ref.Name = "", ""
	if w.FalseOutages != ref.FalseOutages || w.Probes != ref.Probes || w.DetectionMeanSeconds != ref.DetectionMeanSeconds {
		t.Fatalf("window 10 s: %+v\nwithout: %+v", w, ref)
	}
}

// TestWindowClosedForm checks the closed forms with a window against the engine: at 20%
// independent loss a 20 s window needs five failures 5 s apart, so the outage rate is that of
// N = 5 and the detection from the first failure T + 4 (R + T) = 23 s.
func TestWindowClosedForm(t *testing.T) {
	p := windowPolicy(20 * time.Second)
	five := reference()
	five.Failures = 5
	x, y := Predict(p, 0.2, DefaultRTT), Predict(five, 0.2, DefaultRTT)
	if x.FalseOutagesPerDay != y.FalseOutagesPerDay || x.DetectionFromFirstFailureSeconds != 23 {
		t.Fatalf("window: %+v\nN = 5: %+v", x, y)
	}
	r := runOne(t, p, Config{Loss: Loss{Probe: 0.2}, Days: 300, Trials: 1, Seed: 13})
	secs := r.Days * 86400
	near(t, "false outages", float64(r.FalseOutages), x.FalseOutagesPerDay*r.Days, math.Sqrt(x.OutageVariance*secs), 2)
}

// TestRecoveryClosedForm checks the closed forms with qualify_successes = 3 (qualify-semantics
// §5) against the engine: the mean false outage, S_D - T + W_0 + RTT, against the sample's
// own spread, and the outage rate.
func TestRecoveryClosedForm(t *testing.T) {
	p := reference()
	p.Successes, p.DownInterval = 3, 10*time.Second
	fixed := reference()
	fixed.DownInterval = 2 * time.Second
	if w, n := recovery(fixed, 0.2, 0.02); math.Abs(w-0.2*5/0.8) > 1e-12 || math.Abs(n-1/0.8) > 1e-12 {
		t.Fatalf("M = 1, D = 2 s: wait %v probes %v, want p S_D/q and 1/q", w, n)
	}
	// The backoff's steps after the first down probe: 7, 11, 19, then 33 s.
	backoff := 0.2*7 + 0.04*11 + 0.008*19 + 0.0016*33/0.8
	if w, n := recovery(reference(), 0.2, 0.02); math.Abs(w-backoff) > 1e-12 || math.Abs(n-1/0.8) > 1e-12 {
		t.Fatalf("M = 1, the backoff: wait %v probes %v, want %v and 1/q", w, n, backoff)
	}
	r := runOne(t, p, Config{Loss: Loss{Probe: 0.2}, Days: 100, Trials: 1, Seed: 17})
	x := Predict(p, 0.2, DefaultRTT)
	n := float64(r.Recovered)
	if n < 1000 {
		t.Fatalf("only %d outages recovered", r.Recovered)
	}
	sampleVar := r.OutageSq/n - r.MeanFalseOutageSeconds*r.MeanFalseOutageSeconds
	near(t, "mean outage", r.MeanFalseOutageSeconds, x.MeanFalseOutageSeconds, math.Sqrt(sampleVar/n), 0)
	near(t, "false outages", float64(r.FalseOutages), x.FalseOutagesPerDay*r.Days, math.Sqrt(x.OutageVariance*r.Days*86400), 2)
}
