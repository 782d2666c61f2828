package simulate

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// z is how many standard deviations a statistic may stray from its
// closed form: a correct simulator fails a 5-sigma check about once in 1.7
// million, and the runs are seeded, so a pass is reproducible.
const z = 5

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func asterisk() qualify.Policy {
	return qualify.Policy{Frequency: 60 * time.Second, Timeout: 3 * time.Second}
}

func reference() qualify.Policy {
	return qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second}
}

// policies covers every interval rule: Asterisk's (R, D unset), the
// contract's reference, N > 1 without R (F rhythm), and D apart from R.
var policies = map[string]qualify.Policy{
	"asterisk":  asterisk(),
	"reference": reference(),
	"no-retry":  {Frequency: 20 * time.Second, Timeout: 2 * time.Second, Failures: 2},
	"down":      {Frequency: 30 * time.Second, Timeout: sec(1.5), Failures: 2, RetryInterval: time.Second, DownInterval: 10 * time.Second},
}

func runOne(t *testing.T, p qualify.Policy, cfg Config) Result {
	t.Helper()
	rs, err := Run(t.Context(), []AoR{{Name: "x", Policy: p}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rs[0]
}

// near checks observed against expected within z standard deviations sd
// plus slack, the reward of the run's two partial cycles at its ends.
func near(t *testing.T, what string, observed, expected, sd, slack float64) {
	t.Helper()
	if math.Abs(observed-expected) > z*sd+slack {
		t.Errorf("%s = %.6g, closed form %.6g, tolerance %.3g (sd %.3g)", what, observed, expected, z*sd+slack, sd)
	}
}

func TestHealthyRunMatchesClosedForms(t *testing.T) {
	losses := map[string]float64{"asterisk": 0.05, "reference": 0.2, "no-retry": 0.1, "down": 0.15}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			loss := losses[name]
			r := runOne(t, p, Config{Loss: Loss{Probe: loss}, Days: 100, Trials: 1, Seed: 7})
			x := Predict(p, loss, DefaultRTT)
			secs := r.Days * 86400
			cycle := float64(p.FailureThreshold() + 1)
			near(t, "false outages", float64(r.FalseOutages), x.FalseOutagesPerDay*r.Days, math.Sqrt(x.OutageVariance*secs), 2)
			near(t, "probes", float64(r.Probes), x.ProbesPerHourHealthy*r.Days*24, math.Sqrt(x.ProbeVariance*secs), 2*cycle)
			near(t, "unavailable seconds", r.UnavailableFraction*secs, x.UnavailableFraction*secs, math.Sqrt(x.UnavailableVariance*secs), 2*p.Frequency.Seconds())
			if r.Recovered < 100 {
				t.Fatalf("only %d outages recovered; the check needs a sample", r.Recovered)
			}
			near(t, "mean outage", r.MeanFalseOutageSeconds, x.MeanFalseOutageSeconds, math.Sqrt(x.OutageDurationVariance/float64(r.Recovered)), 0)
		})
	}
}

func TestAsteriskFalseOutagesPerDay(t *testing.T) {
	// The rule of thumb, exactly: 86400/F * p(1-p) for N = 1.
	x := Predict(asterisk(), 0.01, DefaultRTT)
	if want := 86400.0 / 60 * 0.01 * 0.99; math.Abs(x.FalseOutagesPerDay-want) > 1e-9*want {
		t.Fatalf("closed form %v, want 86400/F p(1-p) = %v", x.FalseOutagesPerDay, want)
	}
	if want := 60/0.99 - 3 + DefaultRTT.Seconds(); math.Abs(x.MeanFalseOutageSeconds-want) > 1e-9 {
		t.Fatalf("mean outage %v, want F/q - T + RTT = %v", x.MeanFalseOutageSeconds, want)
	}
}

func TestNFailuresScaleAsPowerOfLoss(t *testing.T) {
	// 86400/F p^N to first order: the exact form's ratio to it tends to 1.
	p := reference()
	for _, loss := range []float64{1e-2, 1e-3, 1e-4} {
		x := Predict(p, loss, DefaultRTT)
		ratio := x.FalseOutagesPerDay / (86400 / 30 * math.Pow(loss, 3))
		if math.Abs(ratio-1) > 2*loss*3 {
			t.Errorf("loss %v: exact / (86400/F p^N) = %v, want 1 + O(p)", loss, ratio)
		}
	}
}

func TestDetectionApproachesButNeverExceedsBound(t *testing.T) {
	const trials = 1000
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			r := runOne(t, p, Config{Days: 1, Trials: trials, DeadSpell: time.Minute, Seed: 3})
			x := Predict(p, 0, DefaultRTT)
			bound := WorstDetection(p).Seconds()
			if r.DetectionWorstSeconds > bound {
				t.Fatalf("worst detection %v s exceeds the bound %v s", r.DetectionWorstSeconds, bound)
			}
			// Deaths are uniform over the period F; all trials miss its
			// last delta with probability exp(-trials delta/F) = 1e-6.
			delta := p.Frequency.Seconds() * math.Log(1e6) / trials
			if r.DetectionWorstSeconds < bound-delta {
				t.Errorf("worst detection %v s, want within %.3f s of the bound %v s", r.DetectionWorstSeconds, delta, bound)
			}
			near(t, "mean detection", r.DetectionMeanSeconds, x.DetectionMeanSeconds, p.Frequency.Seconds()/math.Sqrt(12*trials), 0)
			retry, _ := steps(p)
			first := (p.ProbeTimeout() + time.Duration(p.FailureThreshold()-1)*retry).Seconds()
			if r.DetectionFromFirstFailureWorstSeconds != first {
				t.Errorf("from first failure %v s, want T + (N-1) S_R = %v s", r.DetectionFromFirstFailureWorstSeconds, first)
			}
		})
	}
}

func TestLossNeverStretchesDetection(t *testing.T) {
	losses := []Loss{{Probe: 0.3}, {Packet: 0.3}, {Probe: 0.2, Burst: 10 * time.Second}}
	for _, loss := range losses {
		for name, p := range policies {
			r := runOne(t, p, Config{Loss: loss, Days: 1, Trials: 300, DeadSpell: time.Minute, Seed: 5})
			if bound := WorstDetection(p).Seconds(); r.DetectionWorstSeconds > bound {
				t.Errorf("%s %+v: worst detection %v s > bound %v s", name, loss, r.DetectionWorstSeconds, bound)
			}
		}
	}
}

func TestDeadProbeRate(t *testing.T) {
	// The reference policy probes a dead peer every T + F = 33 s once the
	// down backoff (2, 4, 8, 16 s after each timeout) has ended: 109.09
	// an hour, 5.45 UDP datagrams a minute (3 a probe within T = 3 s). A
	// spell also holds the first probe after the death, the N-1 retries
	// and the backoff's 4 shorter steps, so its count differs from W/S_D
	// by at most N+5 probes.
	const spell = 24 * time.Hour
	r := runOne(t, reference(), Config{Days: 1, Trials: 20, DeadSpell: spell, Seed: 1})
	x := Predict(reference(), 0, DefaultRTT)
	if want := 3600.0 / 33; x.ProbesPerHourDown != want || x.DatagramsPerMinuteDown != 3*60.0/33 {
		t.Fatalf("closed form %v an hour, %v datagrams a minute; want %v and %v", x.ProbesPerHourDown, x.DatagramsPerMinuteDown, want, 3*60.0/33)
	}
	if slack := 8 / spell.Hours(); math.Abs(r.ProbesPerHourDead-x.ProbesPerHourDown) > slack {
		t.Fatalf("dead probe rate %v an hour, want %v within %v", r.ProbesPerHourDead, x.ProbesPerHourDown, slack)
	}
}

func TestLatencyOnlyNeverUnroutable(t *testing.T) {
	p := asterisk()
	p.LatencyOnly = true
	r := runOne(t, p, Config{Loss: Loss{Probe: 0.1}, Days: 20, Trials: 1, Seed: 1})
	if r.FalseOutages == 0 || r.UnavailableFraction != 0 {
		t.Fatalf("latency only: %d outages, unavailable %v; want outages and 0", r.FalseOutages, r.UnavailableFraction)
	}
}

func TestDeterministic(t *testing.T) {
	aors := []AoR{{"a", asterisk()}, {"r", reference()}}
	run := func(workers int, seed uint64) []Result {
		rs, err := Run(t.Context(), aors, Config{Loss: Loss{Packet: 0.2, Burst: 5 * time.Second}, Days: 5, Trials: 50, Seed: seed, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	a, b := run(1, 9), run(4, 9)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	if c := run(2, 10); reflect.DeepEqual(a, c) {
		t.Fatal("another seed gave the same results")
	}
}

func TestRunRejects(t *testing.T) {
	cases := map[string]struct {
		aor  AoR
		loss Loss
		want error
	}{
		"qualify off":  {AoR{"off", qualify.Policy{}}, Loss{}, ErrQualifyOff},
		"bad policy":   {AoR{"bad", qualify.Policy{Frequency: -1}}, Loss{}, qualify.ErrPolicy},
		"probe loss":   {AoR{"a", asterisk()}, Loss{Probe: 1.5}, ErrLoss},
		"packet loss":  {AoR{"a", asterisk()}, Loss{Packet: -0.1}, ErrLoss},
		"NaN":          {AoR{"a", asterisk()}, Loss{Probe: math.NaN()}, ErrLoss},
		"both":         {AoR{"a", asterisk()}, Loss{Probe: 0.1, Packet: 0.1}, ErrLoss},
		"burst":        {AoR{"a", asterisk()}, Loss{Probe: 0.1, Burst: -time.Second}, ErrLoss},
		"never routes": {AoR{"a", asterisk()}, Loss{Probe: 1}, ErrStuck},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Run(t.Context(), []AoR{c.aor}, Config{Loss: c.loss, Days: 1, Trials: 1})
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
		})
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, []AoR{{"a", asterisk()}}, Config{Days: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}
