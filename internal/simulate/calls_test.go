package simulate

import (
	"testing"
	"time"
)

// TestCallsShortenDetection checks qualify-semantics §11.1 in the
// simulator: a call every C = 5 s seen failing X = 2 s after it began
// detects a death within C + X + T + (N-1)(R+T) = 20 s, against the
// probes' 43 s; with X = 32 s (Asterisk's Timer B over UDP) the calls
// do not beat the probes, and never make detection worse than the probes'
// bound (the mean within noise: the trials' deaths fall differently
// once a late call's timeout has moved a probe).
func TestCallsShortenDetection(t *testing.T) {
	cfg := Config{Days: 1, Trials: 300, Seed: 3}
	probes := runOne(t, reference(), cfg)
	cfg.Calls = Calls{Interval: 5 * time.Second, Timeout: 2 * time.Second}
	fast := runOne(t, reference(), cfg)
	cfg.Calls.Timeout = 32 * time.Second
	slow := runOne(t, reference(), cfg)
	if fast.DetectionWorstSeconds > 20.1 || probes.DetectionWorstSeconds < 40 {
		t.Errorf("worst detection %.1f s with calls (fr_timer 2 s), %.1f s without; want at most 20 and about 43",
			fast.DetectionWorstSeconds, probes.DetectionWorstSeconds)
	}
	if slow.DetectionWorstSeconds > 43 || slow.DetectionMeanSeconds > probes.DetectionMeanSeconds+2 || slow.DetectionMeanSeconds < probes.DetectionMeanSeconds-2 {
		t.Errorf("with Timer B 32 s: %.1f s worst, %.1f s mean, against %.1f s, %.1f s by probes",
			slow.DetectionWorstSeconds, slow.DetectionMeanSeconds, probes.DetectionWorstSeconds, probes.DetectionMeanSeconds)
	}
}

// TestQuietOnlySavesProbes checks qualify-semantics §11.3 in the
// simulator: a healthy trunk answering a call every 5 s costs no probe
// with qualify_quiet_only, and detection of its death stays within
// the bound of the calls.
func TestQuietOnlySavesProbes(t *testing.T) {
	p := reference()
	p.QuietOnly = true
	cfg := Config{Days: 2, Trials: 200, Seed: 3, Calls: Calls{Interval: 5 * time.Second, Timeout: 2 * time.Second}}
	r := runOne(t, p, cfg)
	if r.Probes > 1 || r.DetectionWorstSeconds > 20.1 {
		t.Errorf("%d probes in %g healthy days, detection %.1f s worst; want 1 and at most 20", r.Probes, cfg.Days, r.DetectionWorstSeconds)
	}
}
