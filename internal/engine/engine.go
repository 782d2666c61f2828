package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/schedule"
)

// Prober sends one probe and returns what it measured. It must honour
// t.Timeout from the first send, return promptly when ctx is cancelled, and
// be safe for concurrent use.
type Prober interface {
	Probe(ctx context.Context, t qualify.Target) qualify.Result
}

// AsyncProber is a Prober that can also start a probe without blocking.
// When the configured Prober implements it, the engine keeps no goroutine
// per probe in flight: the scheduler's loop starts each probe and the
// prober's own goroutines report the results (issue 7).
type AsyncProber interface {
	Prober
	// Start starts one probe of t, as Probe would send it, and
	// returns at once. It calls done exactly once with tag and the
	// result, from any goroutine, possibly before returning; done does
	// not block. When ctx is cancelled, done must come promptly. An
	// engine passes the same done to every probe and tells them apart by
	// tag, so a probe in flight costs no closure.
	Start(ctx context.Context, t qualify.Target, tag uint64, done func(tag uint64, r qualify.Result))
}

// AoR is one AoR to qualify, as the configuration defines it. It is
// qualify.AoR, which a configuration reader's own AoR type can embed, so
// that a caller applies its AoRs without copying them (see ApplyFunc).
type AoR = qualify.AoR

// Config configures an Engine. Only Prober is required.
type Config struct {
	// Prober sends the probes.
	Prober Prober
	// MaxInFlight bounds the probes in flight that hold a job of the
	// scheduler (a Prober's, and an AsyncProber's but for datagram
	// probes, which cost nothing in flight and are not bounded); zero
	// means the scheduler's default.
	MaxInFlight int
	// MaxInitialQualifyTime bounds the random delay of each contact's first
	// probe (max_initial_qualify_time); zero means F.
	MaxInitialQualifyTime time.Duration
	// Coalesce is how late a probe may start so that probes due close
	// together start in one wake-up of the scheduler (see
	// schedule.Config.Coalesce); zero means DefaultCoalesce, negative
	// starts every probe at its due time.
	Coalesce time.Duration
	// Rand returns uniform numbers in [0, 1) for the first-probe delay; nil
	// means math/rand/v2.
	Rand func() float64
	// Lateness, if set, is called with how late each scheduled probe
	// started against its due time. It must be cheap and safe for
	// concurrent use.
	Lateness func(time.Duration)
	// Observe, if set, is called after every applied probe with the AoR
	// name, the result and its verdict. It must be cheap and safe for
	// concurrent use.
	Observe func(aor string, r qualify.Result, ok bool, reason qualify.Reason)
	// Now returns the current time; nil means time.Now. A simulator that
	// drives the engine in virtual time (see Driver) sets it.
	Now func() time.Time
}

// Engine qualifies contacts. Create it with New, load AoRs with Apply, and
// call Run.
type Engine struct {
	cfg   Config
	sched *schedule.Scheduler
	async AsyncProber // cfg.Prober, when it can probe without blocking
	// dgram is cfg.Prober, when it lets the engine time its UDP probes;
	// salt is drawn per engine for their keys (see datagramKey).
	dgram DatagramProber
	salt  uint64
	// epoch and epochUnix anchor the slots' times to the monotonic
	// clock (see unix).
	epoch     time.Time
	epochUnix int64
	// probeDone is asyncDone, bound once; runCtx is Run's context, set
	// before the first probe starts.
	probeDone func(uint64, qualify.Result)
	runCtx    context.Context

	// applyMu serializes Apply. Only Apply changes aors, order, the AoRs'
	// ranks, the slots' URIs and the slots slice itself, so while it holds
	// applyMu it may read them without mu (see plan and sorted).
	applyMu sync.Mutex
	// spare is the order before the current one, cleared: no reader has
	// it, so Apply builds the next order in it without mu instead of
	// allocating one (see sorted). Guarded by applyMu.
	spare []*aorState

	mu    sync.Mutex // guards everything below; see the package doc
	slots []contact
	free  []uint32
	aors  map[string]*aorState
	// order holds the AoRs of aors sorted by name, each at its rank, so
	// that a listing never sorts with the engine locked.
	order   []*aorState
	waiters map[uint32][]chan<- ContactResult
	subs    []*Subscription
	seq     uint64  // last event sequence number
	stopped bool    // Run returned: answers to datagram probes are late
	sum     Summary // kept up to date by Apply, record and shiftRoutable; AoRs unused

	probes [5]atomic.Uint64 // applied probes by verdict reason
	// datagrams counts the datagram probes in flight, which hold no job
	// of the scheduler between their events; written with mu held.
	datagrams atomic.Int64
}

// DefaultCoalesce is Config.Coalesce's default: at 16,667 probes/s, about
// 330 probes start per wake-up, and no probe is more than 20 ms late for
// it. A wake-up of the process costs tens of microseconds on a virtual
// machine (the kernel's context switches and the Go runtime's idle
// threads); at 10,000 probes/s going from 5 to 20 ms cut the CPU per probe
// by about a sixth (issue 7). 20 ms is noise against a qualify_frequency of
// seconds, and the RTT is measured from the actual send.
const DefaultCoalesce = 20 * time.Millisecond

// ErrNoProber is returned by New without a Prober.
var ErrNoProber = errors.New("engine: no prober configured")

// New returns an Engine with no AoRs.
func New(cfg Config) (*Engine, error) {
	if cfg.Prober == nil {
		return nil, ErrNoProber
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	now := cfg.Now()
	e := &Engine{
		epoch: now, epochUnix: now.UnixNano(),
		cfg:     cfg,
		aors:    map[string]*aorState{},
		waiters: map[uint32][]chan<- ContactResult{},
	}
	if cfg.Coalesce == 0 {
		cfg.Coalesce = DefaultCoalesce
	}
	sc := schedule.Config{MaxInFlight: cfg.MaxInFlight, Released: e.released, Now: cfg.Now, Coalesce: max(cfg.Coalesce, 0)}
	if ap, ok := cfg.Prober.(AsyncProber); ok {
		e.async, e.probeDone = ap, e.asyncDone
		e.sched = schedule.NewAsync(sc, e.startProbe)
		if dp, ok := ap.(DatagramProber); ok {
			e.dgram, e.salt = dp, rand.Uint64()
			dp.AnswerDatagrams(e.answer)
		}
	} else {
		e.sched = schedule.New(sc, e.runProbe)
	}
	return e, nil
}

// Run qualifies until ctx is cancelled, then waits for the probes in flight
// (which see the cancellation) to return. Results that arrive after the
// cancellation are not applied: datagram probes in flight end with the
// waiters of a manual qualify answered with ctx's error.
func (e *Engine) Run(ctx context.Context) {
	e.runCtx = ctx
	stop := context.AfterFunc(ctx, e.stop)
	defer stop()
	e.sched.Run(ctx)
	e.stopDatagrams(ctx.Err())
}

// Counters are totals since the engine started.
type Counters struct {
	// Probes counts applied probes by verdict: index ReasonNone are
	// successes, the others failures by reason.
	Probes [5]uint64
	// InFlight is the number of probes running now; Waiting the number of
	// contacts waiting for their next probe.
	InFlight, Waiting int
}

// Counters returns the engine's totals.
func (e *Engine) Counters() Counters {
	var c Counters
	for i := range e.probes {
		c.Probes[i] = e.probes[i].Load()
	}
	st := e.sched.Stats()
	// A datagram probe in flight keeps its entry in the schedule, for its
	// next event: it is not waiting for its next probe.
	dg := int(e.datagrams.Load())
	c.InFlight, c.Waiting = st.InFlight+dg, max(st.Waiting-dg, 0)
	return c
}
