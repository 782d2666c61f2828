package engine

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/schedule"
)

// Prober sends the probes: the engine starts each one and the prober
// reports its result. It must be safe for concurrent use.
type Prober interface {
	// Start starts one probe of t and returns at once, without blocking.
	// The probe must honour t.Timeout from its first send. Start calls
	// done exactly once with tag and the result, from any goroutine,
	// possibly before it returns; done does not block. When ctx is
	// cancelled, done must come promptly. An engine passes the same done
	// to every probe and tells them apart by tag, so a probe in flight
	// costs no closure.
	Start(ctx context.Context, t probe.Target, tag uint64, done func(tag uint64, r qualify.Result))
}

// AoR is one AoR to qualify, as the configuration defines it. It is
// probe.AoR, which a configuration reader's own AoR type can embed, so
// that a caller applies its AoRs without copying them (see ApplyFunc).
type AoR = probe.AoR

// Config configures an Engine. Only Prober is required.
type Config struct {
	// Prober sends the probes.
	Prober Prober
	// MaxInFlight bounds the probes in flight; due probes wait beyond it.
	// Zero means the scheduler's default.
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
	// drives the engine in virtual time (see Drive) sets it.
	Now func() time.Time
	// HistoryAoRs is how many AoRs keep a history (see History): the
	// first so many in configuration order of the first Apply, then, as
	// AoRs with a history are removed, the next ones in configuration
	// order of a later Apply. An AoR keeps its history until it is
	// removed. Zero means DefaultHistoryAoRs, negative none.
	HistoryAoRs int
	// HistoryBucket is the width of a history's buckets, aligned to the
	// wall clock (a bucket starts at a multiple of it since the Unix
	// epoch); zero means DefaultHistoryBucket.
	HistoryBucket time.Duration
	// HistoryLength is how far back a history reaches, in whole buckets;
	// zero means DefaultHistoryLength.
	HistoryLength time.Duration
	// Seq is the number of the event before the engine's first: events
	// are numbered from Seq+1. A daemon continues its previous process's
	// numbers (from a state file) or starts past them (StartSeq), so that
	// an event stream's client resuming from an id of the previous
	// process is never handed a different event under the same id.
	Seq uint64
}

// Engine qualifies contacts. Create it with New, load AoRs with Apply, and
// call Run (or, in virtual time, Drive).
type Engine struct {
	cfg Config
	// noCleared withholds FailuresCleared: the baseline of
	// BenchmarkLossyProbe1M, which measures what the edge costs.
	noCleared bool
	sched     *schedule.Scheduler
	// epoch and epochUnix anchor the slots' times to the monotonic
	// clock (see mono).
	epoch     time.Time
	epochUnix int64
	// probeDone is probeResult, bound once; runCtx is Run's (or Drive's)
	// context, set before the first probe starts.
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
	// probed is SetProbed's test, nil for every contact. Guarded by
	// applyMu.
	probed Probed

	mu    sync.Mutex // guards everything below; see the package doc
	slots []contact
	free  []uint32
	aors  map[string]*aorState
	// order holds the AoRs of aors sorted by name, each at its rank, so
	// that a listing never sorts with the engine locked.
	order []*aorState
	// histNames are the names of the AoRs with a history, in name order;
	// Apply replaces the slice, never changes it.
	histNames []string
	waiters   map[uint32][]chan<- ContactResult
	subs      []*Subscription
	seq       uint64  // last event sequence number
	durable   uint64  // changes a restart must see (Durable)
	sum       Summary // kept up to date by Apply, record and shiftRoutable; AoRs unused

	// dests indexes the slots by their URI's destination (observe.HostPort)
	// for Observe; nil until the first Observe after an Apply.
	dests map[string][]uint32

	probes [qualify.NumReasons]atomic.Uint64 // applied probes by verdict reason
	// quiet counts the periodic probes skipped with qualify_quiet_only,
	// pulled the probes calls brought forward.
	quiet, pulled atomic.Uint64
}

// DefaultCoalesce is Config.Coalesce's default: at 16,667 probes/s, about
// 330 probes start per wake-up, and no probe is more than 20 ms late for
// it. Every wake-up of the process costs CPU (the kernel's context
// switches and the Go runtime's idle threads), so fewer wake-ups cost
// less per probe (docs/performance.md, "Coalesced wake-ups"). 20 ms is
// noise against a qualify_frequency of seconds, and the RTT is measured
// from the actual send.
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
	cfg.HistoryBucket = cmp.Or(max(cfg.HistoryBucket, 0), DefaultHistoryBucket)
	cfg.HistoryLength = max(cmp.Or(max(cfg.HistoryLength, 0), DefaultHistoryLength), cfg.HistoryBucket)
	cfg.HistoryAoRs = cmp.Or(cfg.HistoryAoRs, DefaultHistoryAoRs)
	now := cfg.Now()
	e := &Engine{
		epoch: now, epochUnix: now.UnixNano(),
		cfg:     cfg,
		aors:    map[string]*aorState{},
		waiters: map[uint32][]chan<- ContactResult{},
		seq:     cfg.Seq,
	}
	if cfg.Coalesce == 0 {
		cfg.Coalesce = DefaultCoalesce
	}
	sc := schedule.Config{MaxInFlight: cfg.MaxInFlight, Released: e.released, Now: cfg.Now, Coalesce: max(cfg.Coalesce, 0)}
	e.sched = schedule.New(sc, e.startProbe)
	e.probeDone = e.probeResult
	return e, nil
}

// Run qualifies until ctx is cancelled, then waits for the probes in flight
// (which see the cancellation) to return. Results that arrive after the
// cancellation are not applied, and the waiters of a manual qualify still
// waiting when Run returns get ctx's error.
func (e *Engine) Run(ctx context.Context) {
	e.runCtx = ctx
	e.sched.Run(ctx)
	e.dismissAll(ctx.Err())
}

// Counters are totals since the engine started.
type Counters struct {
	// Probes counts applied probes by verdict: index ReasonNone are
	// successes, the others failures by reason.
	Probes [qualify.NumReasons]uint64
	// InFlight is the number of probes running now; Waiting the number of
	// contacts waiting for their next probe.
	InFlight, Waiting int
	// Overdue is how long ago the earliest waiting probe fell due (zero
	// when none is late): within milliseconds while the scheduler runs,
	// growing while it is stuck.
	Overdue time.Duration
	// Quiet counts the periodic probes skipped with qualify_quiet_only;
	// Pulled the probes calls that indict a peer brought forward.
	Quiet, Pulled uint64
}

// Counters returns the engine's totals.
func (e *Engine) Counters() Counters {
	var c Counters
	for i := range e.probes {
		c.Probes[i] = e.probes[i].Load()
	}
	c.Quiet, c.Pulled = e.quiet.Load(), e.pulled.Load()
	st := e.sched.Stats()
	c.InFlight, c.Waiting, c.Overdue = st.InFlight, st.Waiting, st.Overdue
	return c
}
