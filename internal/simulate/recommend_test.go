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
		// failures the grid fits; the down interval stays unset (= R).
		"keeps F": {base, Bounds{Loss: 0.05, DetectWithin: 45 * time.Second}, 30 * time.Second, time.Second, 0, 4},
		// A dead peer probed every T + D = 18 s stays within 200 an hour.
		"probe budget": {base, Bounds{Loss: 0.05, DetectWithin: 45 * time.Second, MaxProbesPerHour: 200}, 30 * time.Second, time.Second, 15 * time.Second, 4},
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
