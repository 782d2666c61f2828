package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// buildProbes creates the probe and scheduling series.
func (m *Metrics) buildProbes() []prometheus.Collector {
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_probes_total",
		Help: "Applied probes by verdict: result success (reason none), failure (reason timeout, transport, status or dns) or draining (a 503 with Retry-After).",
	}, []string{"result", "reason"})
	for i, r := range reasons {
		res := result(r == qualify.ReasonNone)
		if r == qualify.ReasonDraining {
			res = "draining"
		}
		m.probes[i] = probes.WithLabelValues(res, r.String())
	}
	rtt := newHistogram("qualifyd_probe_rtt_seconds",
		"Round-trip time of successful probes, from the first send to the final response.")
	dns := newHistogram("qualifyd_probe_dns_seconds",
		"Time spent resolving contact host names, for probes that resolved one.")
	late := newHistogram("qualifyd_schedule_lateness_seconds",
		"How late each scheduled probe started against its due time.")
	m.rtt, m.dns, m.lateness = rtt, dns, late
	return []prometheus.Collector{probes, rtt, dns, late}
}

func newHistogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: Buckets})
}

// ObserveProbe records one applied probe of an AoR's contact: its verdict,
// the RTT of a success and the DNS time when a name was resolved. It has
// the signature of engine.Config.Observe.
func (m *Metrics) ObserveProbe(aor string, r qualify.Result, ok bool, reason qualify.Reason) {
	if int(reason) < len(m.probes) {
		m.probes[reason].Inc()
	}
	if ok {
		m.rtt.Observe(r.RTT.Seconds())
	}
	if r.DNS > 0 {
		m.dns.Observe(r.DNS.Seconds())
	}
	if m.aors != nil {
		m.aors.get(aor).observeProbe(r, ok)
	}
}

// ObserveLateness records how late a scheduled probe started; an early
// start counts as zero. It has the signature of engine.Config.Lateness.
func (m *Metrics) ObserveLateness(d time.Duration) {
	m.lateness.Observe(max(d, 0).Seconds())
}
