package simulate

import (
	"errors"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestRecommend(t *testing.T) {
	base := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second}
	cases := map[string]struct {
		base    qualify.Policy
		bounds  Bounds
		f, r, d time.Duration
		n       int
	}{
		// 30 + 3 + (N-1)(R+3) <= 45: N = 4 with R = 1 s is the most
		// failures the grid fits; the down interval stays unset (the
		// backoff from R to F).
		"keeps F": {base, Bounds{Loss: 0.05, DetectWithin: 45 * time.Second}, 30 * time.Second, time.Second, 0, 4},
		// A dead peer probed every T + F = 33 s once the backoff ends
		// stays within 200 an hour with D unset.
		"probe budget": {base, Bounds{Loss: 0.05, DetectWithin: 45 * time.Second, MaxProbesPerHour: 200}, 30 * time.Second, time.Second, 0, 4},
		// Nothing at F = 60 or 45, 30, 20 detects within 20 s; F = 15
		// with one failure does (18 s).
		"lowers F": {asterisk(), Bounds{Loss: 0.01, DetectWithin: 20 * time.Second}, 15 * time.Second, 0, 0, 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cs, err := Recommend(c.base, c.bounds)
			if err != nil {
				t.Fatal(err)
			}
			p := cs[0].Policy
			if p.Frequency != c.f || p.Failures != c.n || p.RetryInterval != c.r || p.DownInterval != c.d {
				t.Fatalf("winner F=%v N=%d R=%v D=%v, want F=%v N=%d R=%v D=%v",
					p.Frequency, p.Failures, p.RetryInterval, p.DownInterval, c.f, c.n, c.r, c.d)
			}
			for _, o := range cs[1:] {
				if o.Expected.FalseOutagesPerDay < cs[0].Expected.FalseOutagesPerDay || WorstDetection(o.Policy) > c.bounds.DetectWithin {
					t.Errorf("row N=%d beats the winner or misses the bound: %+v", o.Policy.Failures, o.Expected)
				}
			}
		})
	}
}

func TestRecommendRejects(t *testing.T) {
	base := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second}
	if _, err := Recommend(base, Bounds{Loss: 0.05, DetectWithin: 2 * time.Second}); !errors.Is(err, ErrNoSetting) {
		t.Fatalf("detection within 2 s with T = 3 s: %v, want ErrNoSetting", err)
	}
	if _, err := Recommend(base, Bounds{Loss: 1, DetectWithin: time.Minute}); !errors.Is(err, ErrBounds) {
		t.Fatalf("loss 1: %v, want ErrBounds", err)
	}
}

// TestProposeAuto checks --recommend's auto proposal: at 1% with a 45 s bound (N <= 4 with
// R = 1 s) auto holds N = 3 and a clean link N = 2, beating the winner's 4 there; at 5% no N
// within the bound meets 0.01 a day (N = 5 would), so nothing is proposed.
func TestProposeAuto(t *testing.T) {
	base := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second}
	b := Bounds{Loss: 0.01, DetectWithin: 45 * time.Second}
	cs, err := Recommend(base, b)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := ProposeAuto(cs[0].Policy, b)
	if !ok || !a.Policy.FailuresAuto || a.Policy.FailuresMax != 4 || a.N != 3 || a.CleanN != 2 ||
		a.Clean.DetectionWorstSeconds >= cs[0].Expected.DetectionWorstSeconds || WorstDetection(a.Policy) > b.DetectWithin {
		t.Fatalf("proposal %v %+v; winner %+v", ok, a, cs[0].Policy)
	}
	b.Loss = 0.05
	if cs, err = Recommend(base, b); err != nil {
		t.Fatal(err)
	}
	if a, ok := ProposeAuto(cs[0].Policy, b); ok {
		t.Fatalf("auto proposed at 5%% within 45 s: %+v", a)
	}
}

// TestWindowFor checks the window --recommend tries against bursts: two bursts rounded up to
// whole S_R, only where it acts and keeps the bound.
func TestWindowFor(t *testing.T) {
	p := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second}
	for _, c := range []struct {
		n            int
		burst, bound time.Duration
		want         time.Duration
	}{
		{2, 10 * time.Second, time.Minute, 20 * time.Second}, // K = 5: 53 s
		{2, 9 * time.Second, time.Minute, 20 * time.Second},  // 18 s rounds up to 20
		{2, 10 * time.Second, 50 * time.Second, 0},           // 53 s > 50 s
		{5, 10 * time.Second, time.Minute, 0},                // (5-1) 5 s = 20 s already
		{2, 0, time.Minute, 0},
	} {
		if got := WindowFor(p, c.n, c.burst, c.bound); got != c.want {
			t.Errorf("N %d, burst %v, bound %v: window %v, want %v", c.n, c.burst, c.bound, got, c.want)
		}
	}
}
