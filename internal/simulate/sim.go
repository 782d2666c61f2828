package simulate

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// epoch is where virtual time starts.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// contactURI is the simulated contact of every AoR.
const contactURI = "sip:peer@192.0.2.1:5060"

// sim is a real engine qualifying one AoR's contact against a simulated
// peer, stepped in virtual time by a discrete-event loop: the next event
// is the earliest of a probe becoming due and a probe in flight ending.
// The sim is the engine's Prober: Start asks the peer for the probe's
// outcome and queues its end, where the loop reports it with the clock
// set there.
type sim struct {
	now     time.Time
	e       *engine.Engine
	d       *engine.Driver
	sub     *engine.Subscription
	peer    *peer
	done    func(uint64, qualify.Result) // the engine's, the same for every probe
	flight  []inFlight                   // probes in flight, by end time
	w       watch
	started int // probes started
	calls   caller
	name    string // the AoR's
}

// inFlight is a started probe whose outcome the peer decided.
type inFlight struct {
	tag uint64
	end time.Time
	res qualify.Result
}

// newSim applies one AoR to a fresh engine at the epoch.
func newSim(ctx context.Context, a AoR, p *peer, rng *rand.Rand, calls caller) (*sim, error) {
	s := &sim{now: epoch, peer: p, name: a.Name, calls: calls}
	// A simulation keeps no history: it runs for virtual years and reads
	// only the events.
	e, err := engine.New(engine.Config{Prober: s, Rand: rng.Float64, Now: func() time.Time { return s.now }, HistoryAoRs: -1})
	if err != nil {
		return nil, err
	}
	s.e, s.d, s.sub = e, e.Drive(ctx), e.Subscribe(64)
	err = e.Apply([]engine.AoR{{Name: a.Name, Contacts: []string{contactURI}, Policy: &a.Policy}})
	return s, err
}

// runUntil processes every event up to limit and leaves the clock there.
func (s *sim) runUntil(limit time.Time) {
	for s.step(limit) {
	}
	s.now = limit
}

// runWhile processes events up to limit while cond holds; it reports
// whether cond stopped holding.
func (s *sim) runWhile(cond func() bool, limit time.Time) bool {
	for cond() {
		if !s.step(limit) {
			return false
		}
	}
	return true
}

// step processes the next event at or before limit; false when there is
// none. A completion goes before a probe due at the same time, as the
// completion may move it.
func (s *sim) step(limit time.Time) bool {
	due, ok := s.d.Next()
	if at, call := s.calls.next(); call && !at.After(limit) && (!ok || !due.Before(at)) &&
		(len(s.flight) == 0 || s.flight[0].end.After(at)) {
		s.call(at)
		return true
	}
	if len(s.flight) > 0 && (!ok || !s.flight[0].end.After(due)) {
		if s.flight[0].end.After(limit) {
			return false
		}
		s.complete()
		return true
	}
	if !ok || due.After(limit) {
		return false
	}
	s.now = due
	s.d.StartDue()
	return true
}

// Start is the engine's Prober: the peer decides the outcome of the probe
// of t sent now, and the probe ends when the peer says.
func (s *sim) Start(_ context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	res, end := s.peer.probe(s.now, t.Timeout)
	s.done = done
	s.push(inFlight{tag: tag, end: end, res: res})
	s.started++
}

// push inserts f in end-time order (few probes are ever in flight).
func (s *sim) push(f inFlight) {
	i := len(s.flight)
	s.flight = append(s.flight, f)
	for i > 0 && s.flight[i-1].end.After(f.end) {
		s.flight[i] = s.flight[i-1]
		i--
	}
	s.flight[i] = f
}

// complete ends the earliest ending probe, at its end, and reads the edges
// it made.
func (s *sim) complete() {
	f := s.flight[0]
	s.flight = append(s.flight[:0], s.flight[1:]...)
	s.now = f.end
	s.done(f.tag, f.res)
	s.drain()
}

// drain reads the edges the engine published.
func (s *sim) drain() {
	for {
		select {
		case ev := <-s.sub.C:
			s.w.see(ev)
		default:
			return
		}
	}
}

// watch follows the contact's edges, as an operator's log would.
type watch struct {
	status       qualify.Status
	down         bool      // Unreachable
	downAt       time.Time // since when
	unroutableAt time.Time // zero while routable
	outages      int       // transitions to Unreachable
	recovered    int       // outages that ended
	outageTime   time.Duration
	outageSq     float64 // sum of squared ended outages, s^2
	unroutable   time.Duration
	runStart     time.Time     // first send of the current failure run
	fromFirst    time.Duration // of the latest detection
}

// see applies one engine event.
func (w *watch) see(ev engine.Event) {
	if ev.Kind == engine.StatusChanged {
		w.status = ev.To
	}
	switch {
	case ev.Kind == engine.ProbeFailed && ev.Failures == 1:
		w.runStart = ev.Result.Sent
	case ev.Kind == engine.StatusChanged && ev.To == qualify.Unreachable:
		if ev.Failures == 1 { // a run of one failure has no ProbeFailed
			w.runStart = ev.Result.Sent
		}
		w.outages++
		w.down, w.downAt, w.fromFirst = true, ev.Time, ev.Time.Sub(w.runStart)
	case ev.Kind == engine.StatusChanged && ev.From == qualify.Unreachable && w.down:
		d := ev.Time.Sub(w.downAt)
		w.recovered++
		w.outageTime += d
		w.outageSq += d.Seconds() * d.Seconds()
		w.down = false
	case ev.Kind == engine.AvailabilityChanged && !ev.Available:
		w.unroutableAt = ev.Time
	case ev.Kind == engine.AvailabilityChanged && !w.unroutableAt.IsZero():
		w.unroutable += ev.Time.Sub(w.unroutableAt)
		w.unroutableAt = time.Time{}
	}
}

// unroutableUntil returns the unroutable time, counting a spell still
// running at end.
func (w *watch) unroutableUntil(end time.Time) time.Duration {
	if w.unroutableAt.IsZero() {
		return w.unroutable
	}
	return w.unroutable + end.Sub(w.unroutableAt)
}
