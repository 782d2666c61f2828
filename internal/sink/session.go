package sink

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// The sink's loop: a session per connection, reconnected with backoff,
// that pushes the queue and runs the reassert, resync and heartbeat
// timers.

// Intervals are a sink's timers; zero disables each.
type Intervals struct {
	// Reassert pushes every known level again.
	Reassert time.Duration
	// Resync reads the router's state back (drivers that can).
	Resync time.Duration
	// Heartbeat tells the router qualifyd is alive (drivers that can).
	Heartbeat time.Duration
}

// Backoff bounds: 1 s doubling to 60 s, each ±20%.
const (
	minBackoff = time.Second
	maxBackoff = 60 * time.Second
	jitter     = 0.2
)

// Run connects and pushes until ctx is done, reconnecting with capped
// exponential backoff, cut short when the router answers again (see
// wait); it returns after closing the session.
func (r *Reconciler) Run(ctx context.Context) {
	r.reconnect(ctx, func(step *int) error {
		r.requeue(r.reasserts)
		return r.session(ctx, step)
	})
}

// reconnect connects and runs body until body returns nil or ctx is
// done, reconnecting with capped exponential backoff after each failure;
// it returns after closing the session.
func (r *Reconciler) reconnect(ctx context.Context, body func(step *int) error) {
	defer r.drv.close()
	for step := 0; ctx.Err() == nil; step++ {
		err := r.drv.connect(ctx)
		if err == nil {
			if err = body(&step); err == nil {
				return
			}
		}
		r.drv.close()
		if ctx.Err() != nil {
			return
		}
		r.failed(err, step)
		if !r.wait(ctx, r.backoff(step)) {
			return
		}
	}
}

// backoff is the wait after the step-th failure in a row.
func (r *Reconciler) backoff(step int) time.Duration { return backoffFor(step, r.rand()) }

// backoffFor is the wait after the step-th failure in a row, u in [0, 1)
// placing it within the jitter: 1 s doubling to 60 s, ±20%.
func backoffFor(step int, u float64) time.Duration {
	d := maxBackoff
	if step < 6 {
		d = min(minBackoff<<step, maxBackoff)
	}
	return time.Duration(float64(d) * (1 - jitter + 2*jitter*u))
}

// failed records and logs a failure: once per backoff step, with the
// router's own text.
func (r *Reconciler) failed(err error, step int) {
	r.mu.Lock()
	r.stats.Up, r.stats.LastError = false, err.Error()
	r.mu.Unlock()
	r.notice(slog.LevelWarn, "sink "+r.name+": "+err.Error(), slog.Int("retry", step+1))
}

// succeeded records a successful request; the first after a failure is
// logged.
func (r *Reconciler) succeeded(step *int) {
	r.mu.Lock()
	r.stats.Up, r.stats.LastSuccess = true, time.Now()
	r.mu.Unlock()
	if *step > 0 {
		r.notice(slog.LevelInfo, "sink "+r.name+": connected")
	}
	*step = 0
}

// wait waits the backoff d before the next connect, and reports whether
// ctx is still live. A driver that can be probed cheaply is probed at
// once: a router that answers (and refused the login or the request) is
// retried at the backoff's pace, so the failure is still logged once per
// step and the router sees one probe per step. One that does not answer
// is probed every aliveEvery, and the wait ends at its first answer, so
// that a router back from a long outage or stall is in step within
// seconds, not a minute.
func (r *Reconciler) wait(ctx context.Context, d time.Duration) bool {
	a, ok := r.drv.(aliver)
	if !ok || probeAlive(ctx, a) {
		return sleep(ctx, d)
	}
	end := time.Now().Add(d)
	for left := time.Until(end); left > 0; left = time.Until(end) {
		if !sleep(ctx, min(aliveEvery, left)) {
			return false
		}
		if probeAlive(ctx, a) {
			break
		}
	}
	return ctx.Err() == nil
}

// probeAlive reports whether a's router answers within aliveEvery.
func probeAlive(ctx context.Context, a aliver) bool {
	ctx, cancel := context.WithTimeout(ctx, aliveEvery)
	defer cancel()
	return a.alive(ctx) == nil
}

// sleep waits d or until ctx is done, and reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// session pushes until an error ends it or ctx is done.
func (r *Reconciler) session(ctx context.Context, step *int) error {
	tm := newTimers(r.iv)
	defer tm.stop()
	if err := r.ticks(ctx, true, true, step); err != nil {
		return err
	}
	for {
		if err := r.pushAll(ctx, tm, step); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.wake:
		case <-tm.reassert:
			tm.resetReassert(r.iv.Reassert)
			r.requeue(r.reasserts)
		case <-tm.resync:
			tm.resetResync(r.iv.Resync)
			if err := r.ticks(ctx, true, false, step); err != nil {
				return err
			}
		case <-tm.heartbeat:
			if err := r.beatDue(ctx, tm, step); err != nil {
				return err
			}
		}
	}
}

// ticks runs a heartbeat and a resync, as the driver can. The heartbeat
// goes first: once renewed, the router cannot fail open (and reset its
// state) behind the read-back that follows, and a restarted qualifyd
// renews it before its first push.
func (r *Reconciler) ticks(ctx context.Context, resync, beat bool, step *int) error {
	if hb, ok := r.drv.(heartbeater); ok && beat && r.iv.Heartbeat > 0 {
		if err := r.beat(ctx, hb, step); err != nil {
			return err
		}
	}
	if rs, ok := r.drv.(resyncer); ok && resync {
		level, err := rs.resync(ctx)
		if err != nil {
			return err
		}
		r.succeeded(step)
		r.readBack(level)
	}
	return nil
}

// beat sends one heartbeat. A refusal that drops (a webhook's 4xx) is
// an answer: logged, and the session goes on, so that a receiver that
// refuses heartbeats still gets the changes.
func (r *Reconciler) beat(ctx context.Context, hb heartbeater, step *int) error {
	fctx, cancel, err := r.fenced(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if r.withhold() {
		return nil
	}
	err = hb.heartbeat(fctx)
	var rej *Rejected
	if errors.As(err, &rej) && rej.Drop {
		r.notice(slog.LevelWarn, "sink "+r.name+": heartbeat: "+rej.Error())
		return nil
	}
	if err != nil {
		return err
	}
	r.succeeded(step)
	return nil
}

// fenced is the gate's answer: ctx, ended when the gate's permission
// ends, when there is no gate or it lets this qualifyd change the router
// now; else its error.
func (r *Reconciler) fenced(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if r.gate == nil {
		return ctx, func() {}, nil
	}
	until, err := r.gate()
	switch {
	case err != nil:
		return nil, nil, err
	case until.IsZero():
		return ctx, func() {}, nil
	}
	fctx, cancel := context.WithDeadline(ctx, until)
	return fctx, cancel, nil
}

// push pushes o under the gate's fence (fenced).
func (r *Reconciler) push(ctx context.Context, o Object) error {
	fctx, cancel, err := r.fenced(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return r.drv.push(fctx, o)
}

// withhold reports whether qualifyd cannot vouch for its verdicts now,
// so that no heartbeat tells the router they are fresh: a stalled
// scheduler's verdicts are stale, and the router must fail open as if
// qualifyd were gone. Each change is logged once.
func (r *Reconciler) withhold() bool {
	var err error
	if r.vouch != nil {
		err = r.vouch()
	}
	switch {
	case err != nil && !r.withheld:
		r.notice(slog.LevelError, "sink "+r.name+": heartbeat withheld: "+err.Error()+": the router fails open after failopen_after")
	case err == nil && r.withheld:
		r.notice(slog.LevelInfo, "sink "+r.name+": heartbeat resumed")
	}
	r.withheld = err != nil
	return r.withheld
}

// pushAll pushes the queue, a batch at a time, until it is empty. A
// heartbeat that falls due meanwhile is sent between two pushes, so that
// a burst longer than the fail-open window (100,000 objects after a
// reconnect) never lets the router fail open; tm nil sends none.
func (r *Reconciler) pushAll(ctx context.Context, tm *timers, step *int) error {
	var batch []Object
	for {
		batch = r.take(batch[:0])
		if len(batch) == 0 {
			return nil
		}
		for i, o := range batch {
			err := r.beatIfDue(ctx, tm, step)
			if err == nil {
				err = r.push(ctx, o)
			}
			var rej *Rejected
			if err != nil && !errors.As(err, &rej) {
				r.putBack(batch[i:])
				return err
			}
			r.pushed(o, rej, step)
		}
	}
}

// beatIfDue sends the heartbeat if its timer has fired (see beatDue).
func (r *Reconciler) beatIfDue(ctx context.Context, tm *timers, step *int) error {
	if tm == nil {
		return nil
	}
	select {
	case <-tm.heartbeat:
		return r.beatDue(ctx, tm, step)
	default:
		return nil
	}
}

// beatDue is the heartbeat timer's tick, whether the loop waits (session)
// or pushes (beatIfDue): it restarts the timer and sends the heartbeat.
func (r *Reconciler) beatDue(ctx context.Context, tm *timers, step *int) error {
	tm.resetHeartbeat(r.iv.Heartbeat)
	return r.ticks(ctx, false, true, step)
}

// timers are a session's reassert, resync and heartbeat timers; a
// disabled one's channel is nil. The first resync and heartbeat run at
// connect, so their timers start one interval later.
type timers struct {
	r, s, h                     *time.Timer
	reassert, resync, heartbeat <-chan time.Time
}

func newTimers(iv Intervals) *timers {
	tm := &timers{}
	tm.r, tm.reassert = startTimer(iv.Reassert)
	tm.s, tm.resync = startTimer(iv.Resync)
	tm.h, tm.heartbeat = startTimer(iv.Heartbeat)
	return tm
}

// startTimer returns a timer of d, or none for d <= 0.
func startTimer(d time.Duration) (*time.Timer, <-chan time.Time) {
	if d <= 0 {
		return nil, nil
	}
	t := time.NewTimer(d)
	return t, t.C
}

func (tm *timers) resetReassert(d time.Duration)  { tm.r.Reset(d) }
func (tm *timers) resetResync(d time.Duration)    { tm.s.Reset(d) }
func (tm *timers) resetHeartbeat(d time.Duration) { tm.h.Reset(d) }

func (tm *timers) stop() {
	for _, t := range []*time.Timer{tm.r, tm.s, tm.h} {
		if t != nil {
			t.Stop()
		}
	}
}
