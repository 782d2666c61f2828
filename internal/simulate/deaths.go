package simulate

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// ErrStuck is returned when the simulated contact never reaches the state
// an experiment waits for, such as Reachable with every probe lost.
var ErrStuck = errors.New("the simulated contact is stuck")

// recoverLimit bounds the wait for a revived peer's contact to be
// Reachable again.
const recoverLimit = 30 * day

// deaths kills the healthy, lossy peer cfg.Trials times, each time at a
// moment uniformly distributed over one probe period, and measures how
// long the engine takes to make its contact Unreachable. The first death
// comes after cfg.WarmUp of healthy history, which qualify_failures=auto
// learns from, as a production trunk dies after months of it; after each
// dead spell the peer revives and the contact recovers before the next
// death, its history carried on.
func deaths(ctx context.Context, s *sim, p qualify.Policy, cfg Config, rng *rand.Rand, r *Result) error {
	var deadTime time.Duration
	deadProbes := 0
	s.runUntil(s.now.Add(cfg.WarmUp))
	for range cfg.Trials {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !s.runWhile(func() bool { return s.w.status != qualify.Reachable }, s.now.Add(recoverLimit)) {
			return ErrStuck
		}
		at := s.now.Add(p.Frequency + time.Duration(rng.Float64()*float64(p.Frequency)))
		s.runUntil(at)
		sent := s.peer.deadSent
		detect, fromFirst, err := s.die(at, p)
		if err != nil {
			return err
		}
		end := at.Add(max(cfg.DeadSpell, detect))
		s.runUntil(end)
		s.peer.revive(end)
		deadTime += end.Sub(at)
		deadProbes += s.peer.deadSent - sent
		r.record(detect, fromFirst)
	}
	r.ProbesPerHourDead = float64(deadProbes) / deadTime.Hours()
	r.DatagramsPerMinuteDead = r.ProbesPerHourDead / 60 * float64(Transmissions(p.ProbeTimeout()))
	return nil
}

// die kills the peer at at and runs until its contact is Unreachable. It
// returns the time that took (zero if it already was), and the time from
// the first send of the failure run that ended in the detection.
func (s *sim) die(at time.Time, p qualify.Policy) (detect, fromFirst time.Duration, err error) {
	s.peer.die(at)
	if s.w.status == qualify.Unreachable {
		return 0, 0, nil
	}
	outages := s.w.outages
	limit := at.Add(2*WorstDetection(p) + time.Hour)
	if !s.runWhile(func() bool { return s.w.outages == outages }, limit) {
		return 0, 0, ErrStuck
	}
	return s.w.downAt.Sub(at), s.w.fromFirst, nil
}

// record adds one detection to r's statistics.
func (r *Result) record(detect, fromFirst time.Duration) {
	d := detect.Seconds()
	n := float64(len(r.Detections))
	r.Detections = append(r.Detections, d)
	r.DetectionMeanSeconds = (r.DetectionMeanSeconds*n + d) / (n + 1)
	r.DetectionWorstSeconds = max(r.DetectionWorstSeconds, d)
	r.DetectionFromFirstFailureWorstSeconds = max(r.DetectionFromFirstFailureWorstSeconds, fromFirst.Seconds())
}
