package metrics

import (
	"errors"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// DefaultPerAoRLimit is the cap on distinct aor label values when
// Options.PerAoRLimit is not set.
const DefaultPerAoRLimit = 1000

// Buckets are the upper bounds, in seconds, of the RTT, DNS and lateness
// histograms: 0.1 ms to 10 s in 1-2-5 steps.
var Buckets = []float64{
	0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
	0.1, 0.2, 0.5, 1, 2, 5, 10,
}

// Options configures New. The zero value exports the hook-fed series only.
type Options struct {
	// PerAoR adds the qualifyd_aor_* series, labelled by AoR name.
	PerAoR bool
	// PerAoRLimit caps the distinct aor label values; zero or less means
	// DefaultPerAoRLimit.
	PerAoRLimit int
	// Version, if set, is exported as qualifyd_build_info{version}.
	Version string
}

// Sources are what Watch reads at scrape time. Each is called once per
// scrape; a nil one exports nothing.
type Sources struct {
	// Summary gives the contact and AoR gauges (engine.Engine.Summary).
	Summary func() engine.Summary
	// SIP gives the prober's counters.
	SIP func() SIPStats
	// InFlight gives the number of probes in flight
	// (engine.Engine.Counters().InFlight).
	InFlight func() int
	// Calls, if set, gives the probes qualify_quiet_only skipped and
	// those calls brought forward (engine.Engine.Counters().Quiet and
	// Pulled).
	Calls func() (quiet, pulled uint64)
	// EventsDropped, if set, is exported as qualifyd_events_dropped_total:
	// engine events that did not reach ObserveEvent (and the log) because
	// their consumer fell behind (engine.Subscription.Dropped).
	EventsDropped func() uint64
	// LogDropped, if set, is exported as qualifyd_log_lines_dropped_total:
	// log lines dropped because the log's reader fell behind.
	LogDropped func() uint64
	// AoR, if set, gives an AoR's snapshot (engine.Engine.AoR) for the
	// per-AoR statistics' gauges of the AoRs that have per-AoR series;
	// without Options.PerAoR it is not called.
	AoR func(name string) (engine.AoRSnapshot, bool)
}

// Metrics holds the registered series. Its methods are safe for concurrent
// use; the Observe methods take no lock and do not allocate, except the
// per-AoR path on the first observation of an AoR.
type Metrics struct {
	probes     [len(reasons)]prometheus.Counter
	rtt        prometheus.Observer
	dns        prometheus.Observer
	lateness   prometheus.Observer
	changes    [statuses][statuses]prometheus.Counter
	available  [2]prometheus.Counter
	httpPanics prometheus.Counter
	// streamsRefused counts event streams refused at the server's cap.
	streamsRefused prometheus.Counter
	// observations and obsDropped count the calls' outcomes taken, by
	// source and outcome, and dropped, by reason.
	observations [observe.NumSources][observe.NumOutcomes]prometheus.Counter
	obsDropped   [observe.NumDrops]prometheus.Counter
	aors         *aorSet // nil without Options.PerAoR
}

// statuses is the number of qualify.Status values.
const statuses = int(qualify.Removed) + 1

// reasons lists the verdicts in qualify.Reason order.
var reasons = [...]qualify.Reason{
	qualify.ReasonNone, qualify.ReasonTimeout, qualify.ReasonTransport,
	qualify.ReasonStatus, qualify.ReasonDNS, qualify.ReasonDraining,
}

// New creates the series fed by the Observe hooks and registers them with
// reg. The engine that calls the hooks is built after it; Watch then adds
// the series read from that engine at scrape time.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: no registerer")
	}
	m := &Metrics{}
	return m, register(reg, m.build(opts))
}

// Watch registers with reg the series computed at scrape time from src.
func (m *Metrics) Watch(reg prometheus.Registerer, src Sources) error {
	if reg == nil {
		return errors.New("metrics: no registerer")
	}
	cs := []prometheus.Collector{&scrapeCollector{src: src}}
	if src.EventsDropped != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "qualifyd_events_dropped_total",
			Help: "Engine events the log and the event counters missed because they fell behind.",
		}, func() float64 { return float64(src.EventsDropped()) }))
	}
	if src.LogDropped != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "qualifyd_log_lines_dropped_total",
			Help: "Log lines dropped because the log's reader (stdout, stderr) fell behind.",
		}, func() float64 { return float64(src.LogDropped()) }))
	}
	if src.Calls != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "qualifyd_probes_quiet_skipped_total",
			Help: "Periodic probes skipped with qualify_quiet_only: the peer answered a call within qualify_frequency.",
		}, func() float64 { q, _ := src.Calls(); return float64(q) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "qualifyd_probes_pulled_total",
			Help: "Probes brought forward by a call that indicts the peer (timeout, transport, qualify_call_failure_codes).",
		}, func() float64 { _, p := src.Calls(); return float64(p) }))
	}
	if src.AoR != nil && m.aors != nil {
		cs = append(cs, &aorStatsCollector{set: m.aors, aor: src.AoR})
	}
	return register(reg, cs)
}

// register registers every collector of cs with reg, stopping at the first
// error.
func register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// build creates the hook-fed collectors of m and returns them for
// registration.
func (m *Metrics) build(opts Options) []prometheus.Collector {
	cs := m.buildProbes()
	cs = append(cs, m.buildEvents()...)
	cs = append(cs, m.buildObservations()...)
	if opts.Version != "" {
		cs = append(cs, buildInfo(opts.Version))
	}
	if opts.PerAoR {
		m.aors = newAoRSet(opts.PerAoRLimit)
		cs = append(cs, m.aors.collectors()...)
	}
	return cs
}

// buildInfo is the constant qualifyd_build_info gauge.
func buildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "qualifyd_build_info",
		Help:        "Always 1; labels carry the qualifyd version and the Go version that built it.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// result is the result label of a verdict.
func result(ok bool) string {
	if ok {
		return "success"
	}
	return "failure"
}
