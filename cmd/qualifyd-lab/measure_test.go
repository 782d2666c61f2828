package main

import (
	"testing"
	"time"
)

// at is a test instant: s seconds after an arbitrary origin.
func at(s float64) time.Time {
	return time.Unix(1_000_000, 0).Add(time.Duration(s * float64(time.Second)))
}

// testPhases: clean 0-10, 20% loss 10-40, clean 40-50, dead 50-60, clean 60-70.
func testPhases() []phase {
	return []phase{
		{Name: "warm-up", Start: at(0), End: at(10)},
		{Name: "loss 20%", LossPercent: 20, Start: at(10), End: at(40)},
		{Name: "settle", Start: at(40), End: at(50)},
		{Name: "dead", Dead: true, Start: at(50), End: at(60)},
		{Name: "recover", Start: at(60), End: at(70)},
	}
}

func TestMeasureProber(t *testing.T) {
	const p = "x"
	down := func(s float64) transition { return transition{Prober: p, At: at(s)} }
	up := func(s float64) transition { return transition{Prober: p, At: at(s), Up: true} }
	tests := []struct {
		name string
		trs  []transition
		want proberStats
	}{{
		name: "false outage, detection, recovery",
		trs:  []transition{up(1), down(20), up(22.5), down(53), up(61.5), {Prober: "other", At: at(15)}},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {FalseOutages: 1, UnroutableS: 2.5}},
			Detected: true, DetectionS: 3, Recovered: true, RecoveryS: 1.5},
	}, {
		name: "a down just after the loss ended is the loss's",
		trs:  []transition{down(40.3), up(42), down(55), up(60.5)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {FalseOutages: 1, UnroutableS: 1.7}},
			Detected: true, DetectionS: 5, Recovered: true, RecoveryS: 0.5},
	}, {
		name: "a down within the slop of the loss's end is the loss's",
		trs:  []transition{down(40.7), up(41)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {FalseOutages: 1, UnroutableS: 0.3}}},
	}, {
		name: "a down within the slop of the dead spell's start detects it",
		trs:  []transition{down(50.6), up(60.1)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {}}, Detected: true, DetectionS: 0.6, Recovered: true, RecoveryS: 0.1},
	}, {
		name: "before the first phase and after the last",
		trs:  []transition{down(-3), up(-2), down(80), up(81)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {FalseOutages: 2, UnroutableS: 2}, 20: {}}},
	}, {
		name: "an up while the dead spell's end was being recorded is its recovery",
		trs:  []transition{down(53), up(59.9)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {}}, Detected: true, DetectionS: 3, Recovered: true},
	}, {
		name: "an up well inside the dead spell is not its recovery",
		trs:  []transition{down(53), up(55), down(57), up(60.2)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {}}, Detected: true, DetectionS: 3, Recovered: true, RecoveryS: 0.2},
	}, {
		name: "a down after the loss's timeout is the clean phase's",
		trs:  []transition{down(41), up(42)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {FalseOutages: 1, UnroutableS: 1}, 20: {}}},
	}, {
		name: "down at the dead spell's start: clipped, no detection, recovery",
		trs:  []transition{down(48), up(62)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {FalseOutages: 1, UnroutableS: 2}, 20: {}}, AlreadyDown: true, Recovered: true, RecoveryS: 2},
	}, {
		name: "down at the dead spell's start, the report's end closes nothing twice",
		trs:  []transition{down(30)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {FalseOutages: 1, UnroutableS: 20}}, AlreadyDown: true},
	}, {
		name: "a false outage open at the end lasts until the end",
		trs:  []transition{down(53), up(61), down(64.6)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {FalseOutages: 1, UnroutableS: 5.4}, 20: {}},
			Detected: true, DetectionS: 3, Recovered: true, RecoveryS: 1},
	}, {
		name: "never detected, repeated states ignored",
		trs:  []transition{up(1), up(2)},
		want: proberStats{ByLoss: map[int]*lossStats{0: {}, 20: {}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := measureProber(testPhases(), tc.trs, p, 500*time.Millisecond, at(70))
			checkStats(t, got, tc.want)
		})
	}
}

// checkStats compares two proberStats, times to the microsecond.
func checkStats(t *testing.T, got, want proberStats) {
	t.Helper()
	near := func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
	if got.Detected != want.Detected || got.AlreadyDown != want.AlreadyDown || got.Recovered != want.Recovered ||
		!near(got.DetectionS, want.DetectionS) || !near(got.RecoveryS, want.RecoveryS) {
		t.Errorf("got detected %v already down %v %.3fs recovered %v %.3fs, want %v %v %.3fs %v %.3fs",
			got.Detected, got.AlreadyDown, got.DetectionS, got.Recovered, got.RecoveryS,
			want.Detected, want.AlreadyDown, want.DetectionS, want.Recovered, want.RecoveryS)
	}
	for l, w := range want.ByLoss {
		g := got.ByLoss[l]
		if g == nil || g.FalseOutages != w.FalseOutages || !near(g.UnroutableS, w.UnroutableS) {
			t.Errorf("loss %d%%: got %+v, want %+v", l, g, w)
		}
	}
}
