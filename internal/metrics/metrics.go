package metrics

import (
	"errors"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
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
	// Summary, if set, is called once per scrape for the contact and AoR
	// gauges (engine.Engine.Summary).
	Summary func() engine.Summary
	// SIP, if set, is called once per scrape for the prober's counters.
	SIP func() SIPStats
	// InFlight, if set, is called once per scrape for the number of probes
	// in flight (engine.Engine.Counters().InFlight).
	InFlight func() int
	// Version, if set, is exported as qualifyd_build_info{version}.
	Version string
	// EventsDropped, if set, is exported as qualifyd_events_dropped_total:
	// engine events that did not reach ObserveEvent (and the log) because
	// their consumer fell behind (engine.Subscription.Dropped).
	EventsDropped func() uint64
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
	aors       *aorSet // nil without Options.PerAoR
}

// statuses is the number of qualify.Status values.
const statuses = int(qualify.Removed) + 1

// reasons lists the verdicts in qualify.Reason order.
var reasons = [...]qualify.Reason{
	qualify.ReasonNone, qualify.ReasonTimeout, qualify.ReasonTransport,
	qualify.ReasonStatus, qualify.ReasonDNS,
}

// New creates the series and registers them with reg.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: no registerer")
	}
	m := &Metrics{}
	cs := m.build(opts)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// build creates every collector of m and returns them for registration.
func (m *Metrics) build(opts Options) []prometheus.Collector {
	cs := m.buildProbes()
	cs = append(cs, m.buildEvents()...)
	cs = append(cs, &scrapeCollector{opts: opts})
	if opts.Version != "" {
		cs = append(cs, buildInfo(opts.Version))
	}
	if opts.EventsDropped != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "qualifyd_events_dropped_total",
			Help: "Engine events the log and the event counters missed because they fell behind.",
		}, func() float64 { return float64(opts.EventsDropped()) }))
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
