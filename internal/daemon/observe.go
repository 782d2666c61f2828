package daemon

import (
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/observe"
)

// observer is the daemon's observe.Sink: every source of calls' outcomes
// (the API, Asterisk's Manager connection, Kamailio) hands its batches to
// it. It drops what is over the flood limit, applies the rest to the
// engine at once and counts both; nothing is queued.
type observer struct {
	eng *engine.Engine
	m   *metrics.Metrics
	now func() time.Time

	mu  sync.Mutex // guards lim
	lim *observe.Limiter
}

func newObserver(eng *engine.Engine, m *metrics.Metrics, now func() time.Time) *observer {
	if now == nil {
		now = time.Now
	}
	return &observer{eng: eng, m: m, now: now, lim: observe.NewLimiter(observe.DefaultRate, observe.DefaultBurst)}
}

// Observe implements observe.Sink.
func (o *observer) Observe(batch []observe.Observation) observe.Tally {
	o.mu.Lock()
	n := o.lim.Take(o.now(), len(batch))
	o.mu.Unlock()
	t := o.eng.Observe(batch[:n])
	t.Dropped[observe.DropFlood] += len(batch) - n
	o.m.CountObservations(t)
	return t
}

var _ observe.Refuser = (*observer)(nil)

// Refused counts what a source dropped before handing a batch over (a
// body that did not parse, or was too large).
func (o *observer) Refused(t observe.Tally) { o.m.CountObservations(t) }

// Observations returns the daemon's observe.Sink, which the sources of
// calls' outcomes feed (docs/api.md, "Observations").
func (d *Daemon) Observations() observe.Sink { return d.observer }
