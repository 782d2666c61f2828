package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Bounds of the waits between phases.
const (
	readyLimit = 15 * time.Second // qualifyd's first Reachable statuses
	settleMax  = 30 * time.Second // every prober routable again after the loss
)

// runPhases drives the path through its phases: a clean warm-up, each
// loss level, a clean settle until every prober is routable, the dead
// spell, and the recovery. Waiting for phases by timers is the experiment.
func (r *lossyRun) runPhases(ctx context.Context) error {
	if err := r.begin(ctx, "warm-up", impairment{}); err != nil {
		return err
	}
	if err := r.tr.wait(ctx, readyLimit, "qualifyd's AoRs Reachable", func(t *tracker) bool {
		return t.reachable[proberN1] && t.reachable[proberN3]
	}); err != nil {
		return fmt.Errorf("warm-up: %w (see %s/qualifyd.log)", err, r.s.Dir)
	}
	if err := r.hold(ctx, r.interval()); err != nil {
		return err
	}
	for _, l := range r.s.Losses {
		if err := r.begin(ctx, fmt.Sprintf("loss %d%%", l), impairment{lossPercent: l}); err != nil {
			return err
		}
		if err := r.hold(ctx, r.s.LossDuration); err != nil {
			return err
		}
	}
	return r.deadSpell(ctx)
}

// deadSpell settles (every prober routable, then one interval and a random
// part of another, so the spell starts at a random point of the probers'
// cycles), kills the path for s.Dead and a random part of an interval (so
// it ends at another random point), and gives it back until every prober
// has recovered.
func (r *lossyRun) deadSpell(ctx context.Context) error {
	if err := r.begin(ctx, "settle", impairment{}); err != nil {
		return err
	}
	r.waitAllUp(ctx, settleMax, "settle")
	if err := r.hold(ctx, r.interval()+r.jitter()); err != nil {
		return err
	}
	if err := r.begin(ctx, "dead", impairment{dead: true}); err != nil {
		return err
	}
	if err := r.hold(ctx, r.s.Dead+r.jitter()); err != nil {
		return err
	}
	if err := r.begin(ctx, "recover", impairment{}); err != nil {
		return err
	}
	r.waitAllUp(ctx, r.s.Recover, "recover")
	if err := r.hold(ctx, r.interval()); err != nil {
		return err
	}
	return r.closePhase(ctx, time.Now())
}

// interval is the probers' healthy probe interval.
func (r *lossyRun) interval() time.Duration { return time.Duration(r.s.Frequency) * time.Second }

// jitter is a random duration in [0, interval): phases that last whole
// intervals would meet the probers' cycles at the same point every time.
func (r *lossyRun) jitter() time.Duration { return rand.N(r.interval()) }

// waitAllUp waits until every prober is routable; not getting there is a
// finding (it shows in the report), not an error, unless ctx ended.
func (r *lossyRun) waitAllUp(ctx context.Context, limit time.Duration, phase string) {
	err := r.tr.wait(ctx, limit, "every prober routable", func(t *tracker) bool {
		for _, p := range probers {
			if !t.upLocked(p) {
				return false
			}
		}
		return true
	})
	if err != nil && ctx.Err() == nil {
		r.notes = append(r.notes, fmt.Sprintf("%s: %v", phase, err))
	}
}

// begin applies impairment im and starts the phase name with it; the
// previous phase ends at the same instant. The rule takes effect somewhere
// during the nft command, so the boundary is the instant before it when
// the path gets worse and after it when it gets better: a probe sent
// while the rule changed counts under the worse impairment, and a clean
// phase is never blamed for a packet the impairment dropped.
func (r *lossyRun) begin(ctx context.Context, name string, im impairment) error {
	before := time.Now()
	if err := r.lab.impair(ctx, im, len(r.phases)); err != nil {
		return err
	}
	now := time.Now()
	if worse(r.current, im) {
		now = before
	}
	r.current = im
	if err := r.closePhase(ctx, now); err != nil {
		return err
	}
	r.phases = append(r.phases, phase{Name: name, LossPercent: im.lossPercent, Dead: im.dead, Start: now})
	fmt.Fprintf(r.progress, "%s phase %s\n", stamp(now), name)
	return nil
}

// closePhase ends the current phase, if any, at instant at, with the
// counters of its rules.
func (r *lossyRun) closePhase(ctx context.Context, at time.Time) error {
	n := len(r.phases)
	if n == 0 || !r.phases[n-1].End.IsZero() {
		return nil
	}
	c, err := r.lab.counters(ctx, n-1)
	if err != nil {
		return err
	}
	r.phases[n-1].End, r.phases[n-1].Counters = at, c
	return nil
}

// hold lets the current phase run for d, then checks that every process
// is still running.
func (r *lossyRun) hold(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	for _, p := range r.procs {
		if gone, err := p.exited(); gone {
			return fmt.Errorf("%s exited (%v); its log is in %s", p.name, err, r.s.Dir)
		}
	}
	return nil
}

// worse reports whether impairment b loses more than a.
func worse(a, b impairment) bool {
	return b.dead && !a.dead || !a.dead && b.lossPercent > a.lossPercent
}
