package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Defaults of Config.
const (
	DefaultDays      = 2000
	DefaultTrials    = 1000
	DefaultDeadSpell = time.Hour
	DefaultWarmUp    = 14 * day
)

// AoR is one policy to simulate, with one contact.
type AoR struct {
	Name   string
	Policy qualify.Policy
}

// Config says what to simulate. The zero value simulates DefaultDays of a
// lossless path.
type Config struct {
	// Loss is how the path loses probes while the peer is healthy.
	Loss Loss
	// Days is the length of the healthy run, in simulated days; zero means
	// DefaultDays.
	Days float64
	// Seed makes a run reproducible: equal inputs and seeds give equal
	// results, whatever Workers is.
	Seed uint64
	// Trials is how many times the peer dies, for the detection times;
	// zero means DefaultTrials.
	Trials int
	// DeadSpell is how long each death lasts (longer if detection takes
	// longer); zero means DefaultDeadSpell.
	DeadSpell time.Duration
	// WarmUp is the healthy spell before the first death; zero means
	// DefaultWarmUp, negative none.
	WarmUp time.Duration
	// RTT is the path's round-trip time; zero means DefaultRTT.
	RTT time.Duration
	// Workers bounds the experiments run at once; zero means GOMAXPROCS.
	Workers int
	// Calls, if its Interval is set, places a call every Interval to the
	// peer and reports its outcome to the engine as an observation
	// (qualify-semantics §11).
	Calls Calls
}

// Calls is the traffic a trunk carries: a call every Interval, from a
// random phase, answered at once while the peer lives and seen failing
// (a transaction timeout) Timeout after it began while the peer is dead:
// the router's X, Timer B or fr_timer. Calls never fail on a lossy path
// to a live peer, whose INVITE retransmissions get through.
type Calls struct {
	Interval, Timeout time.Duration
}

func (c *Config) defaults() {
	if c.Days <= 0 {
		c.Days = DefaultDays
	}
	if c.Trials <= 0 {
		c.Trials = DefaultTrials
	}
	if c.DeadSpell <= 0 {
		c.DeadSpell = DefaultDeadSpell
	}
	if c.RTT <= 0 {
		c.RTT = DefaultRTT
	}
	if c.WarmUp == 0 {
		c.WarmUp = DefaultWarmUp
	}
	c.WarmUp = max(c.WarmUp, 0)
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
}

// Result is what the simulation measured for one AoR. Times are seconds.
type Result struct {
	Name string `json:"name"`
	// ProbesPerHourHealthy is the probe rate to the healthy, lossy peer.
	ProbesPerHourHealthy float64 `json:"probes_per_hour_healthy"`
	// ProbesPerHourDead is the probe rate over the dead spells, from the
	// moment of death.
	ProbesPerHourDead float64 `json:"probes_per_hour_dead"`
	// DatagramsPerMinuteDead is the same rate in UDP datagrams, each probe
	// of the dead peer sent Transmissions(T) times: what a peer's flood
	// guard counts.
	DatagramsPerMinuteDead float64 `json:"udp_datagrams_per_minute_dead"`
	// FalseOutagesPerDay counts the healthy peer's contact becoming
	// Unreachable. Latency-only AoRs count them too, though they stay
	// routable.
	FalseOutagesPerDay float64 `json:"false_outages_per_day"`
	// MeanFalseOutageSeconds is how long those outages lasted on average,
	// Unreachable to Reachable; zero without one.
	MeanFalseOutageSeconds float64 `json:"mean_false_outage_seconds"`
	// UnavailableFraction is the share of the healthy run the contact was
	// wrongly unroutable; always zero with qualify_latency_only.
	UnavailableFraction float64 `json:"unavailable_fraction"`
	// DetectionWorstSeconds and DetectionMeanSeconds are the worst and the
	// mean time from the peer's death to its contact becoming Unreachable.
	DetectionWorstSeconds float64 `json:"detection_worst_seconds"`
	DetectionMeanSeconds  float64 `json:"detection_mean_seconds"`
	// DetectionFromFirstFailureWorstSeconds is the worst time from the
	// first send of the failure run that ended in detection.
	DetectionFromFirstFailureWorstSeconds float64 `json:"detection_from_first_failure_worst_seconds"`

	// The raw counts behind the rates, for tests and tolerances.
	Probes, FalseOutages, Recovered int       `json:"-"`
	Days                            float64   `json:"-"`
	OutageSq                        float64   `json:"-"` // sum of squared ended outages, s^2
	Detections                      []float64 `json:"-"`
}

// ErrQualifyOff is returned for an AoR whose qualify_frequency is 0: there
// is nothing to simulate.
var ErrQualifyOff = errors.New("qualify is off (qualify_frequency=0)")

// Run simulates every AoR: a healthy run of cfg.Days against a lossy peer,
// and cfg.Trials deaths. The experiments run in parallel, each with its own
// random stream derived from cfg.Seed, so the results depend only on the
// inputs and the seed. It stops early, with ctx's error, when ctx ends.
func Run(ctx context.Context, aors []AoR, cfg Config) ([]Result, error) {
	cfg.defaults()
	if err := cfg.Loss.Validate(); err != nil {
		return nil, err
	}
	for _, a := range aors {
		if err := check(a); err != nil {
			return nil, err
		}
	}
	halves := make([]Result, 2*len(aors))
	errs := make([]error, 2*len(aors))
	parallel(2*len(aors), cfg.Workers, func(i int) {
		errs[i] = experiment(ctx, aors[i/2], cfg, uint64(i), &halves[i], i%2 == 1)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]Result, len(aors))
	for i := range out {
		out[i] = merge(halves[2*i], halves[2*i+1])
	}
	return out, nil
}

// merge joins the healthy run's result and the deaths' result of one AoR.
func merge(h, d Result) Result {
	h.ProbesPerHourDead, h.DatagramsPerMinuteDead = d.ProbesPerHourDead, d.DatagramsPerMinuteDead
	h.DetectionWorstSeconds, h.DetectionMeanSeconds = d.DetectionWorstSeconds, d.DetectionMeanSeconds
	h.DetectionFromFirstFailureWorstSeconds = d.DetectionFromFirstFailureWorstSeconds
	h.Detections = d.Detections
	return h
}

// check rejects an AoR that cannot be simulated.
func check(a AoR) error {
	if err := a.Policy.Validate(); err != nil {
		return fmt.Errorf("AoR %q: %w", a.Name, err)
	}
	if !a.Policy.Enabled() {
		return fmt.Errorf("AoR %q: %w", a.Name, ErrQualifyOff)
	}
	return nil
}

// parallel calls f(0..n-1) on at most workers goroutines.
func parallel(n, workers int, f func(int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// experiment runs one AoR's healthy run or its deaths (stream picks the
// random stream) and fills its half of r.
func experiment(ctx context.Context, a AoR, cfg Config, stream uint64, r *Result, dead bool) error {
	rng := rand.New(rand.NewPCG(cfg.Seed, stream))
	// The calls' phase comes from a stream of its own, so that a run with
	// calls meets the same deaths as one without.
	calls := newCaller(cfg.Calls, rand.New(rand.NewPCG(cfg.Seed, stream|1<<63)))
	s, err := newSim(ctx, a, newPeer(cfg.Loss, cfg.RTT, rng), rng, calls)
	if err != nil {
		return fmt.Errorf("AoR %q: %w", a.Name, err)
	}
	r.Name = a.Name
	if dead {
		err = deaths(ctx, s, a.Policy, cfg, rng, r)
	} else {
		err = healthy(ctx, s, cfg, r)
	}
	if err != nil {
		return fmt.Errorf("AoR %q: %w", a.Name, err)
	}
	return nil
}

// day is one simulated day.
const day = 24 * time.Hour

// healthy runs the lossy, healthy peer for cfg.Days, a day at a time.
func healthy(ctx context.Context, s *sim, cfg Config, r *Result) error {
	end := epoch.Add(time.Duration(cfg.Days * float64(day)))
	for s.now.Before(end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.runUntil(earliest(s.now.Add(day), end))
	}
	hours := cfg.Days * 24
	r.Days, r.Probes = cfg.Days, s.started
	r.ProbesPerHourHealthy = float64(s.started) / hours
	r.FalseOutages, r.Recovered, r.OutageSq = s.w.outages, s.w.recovered, s.w.outageSq
	r.FalseOutagesPerDay = float64(s.w.outages) / cfg.Days
	if s.w.recovered > 0 {
		r.MeanFalseOutageSeconds = s.w.outageTime.Seconds() / float64(s.w.recovered)
	}
	r.UnavailableFraction = s.w.unroutableUntil(end).Seconds() / (hours * 3600)
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
