package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// SIPStats are the prober's counters that the metrics export. The caller
// copies them from its prober; the metrics do not depend on the prober's
// own types.
type SIPStats struct {
	// Requests counts OPTIONS transactions sent (first transmissions).
	Requests uint64
	// Retransmissions counts UDP retransmissions (RFC 3261 Timer E).
	Retransmissions uint64
	// Redials counts TCP/TLS requests sent again on a fresh connection
	// because the reused one stayed silent (qualify-semantics §3.2).
	Redials uint64
	// Dropped counts dropped incoming messages by reason. Keep the keys a
	// small fixed set: each is a label value.
	Dropped map[string]uint64
}

var (
	descContacts = prometheus.NewDesc("qualifyd_contacts",
		"Configured contacts by status (NonQualified, Reachable, Unreachable).", []string{"status"}, nil)
	descRoutable = prometheus.NewDesc("qualifyd_contacts_routable",
		"Contacts that may carry calls: not Unreachable nor draining, or latency-only.", nil, nil)
	descDraining = prometheus.NewDesc("qualifyd_contacts_draining",
		"Contacts whose peer asked for a pause (503 with Retry-After), out of routing until it ends.", nil, nil)
	descAoRs = prometheus.NewDesc("qualifyd_aors",
		"Configured AoRs.", nil, nil)
	descAvailable = prometheus.NewDesc("qualifyd_aors_available",
		"AoRs with at least one routable contact.", nil, nil)
	descDrainHeld = prometheus.NewDesc("qualifyd_aors_unavailable_draining",
		"AoRs without a routable contact while one of theirs drains: out of routing at a peer's request, not for a failure.", nil, nil)
	descInFlight = prometheus.NewDesc("qualifyd_probes_in_flight",
		"Probes running now.", nil, nil)
	descRequests = prometheus.NewDesc("qualifyd_sip_requests_total",
		"SIP OPTIONS transactions sent (first transmissions).", nil, nil)
	descRetrans = prometheus.NewDesc("qualifyd_sip_retransmissions_total",
		"SIP OPTIONS retransmissions over UDP (RFC 3261 Timer E).", nil, nil)
	descRedials = prometheus.NewDesc("qualifyd_sip_redials_total",
		"SIP OPTIONS sent again on a fresh TCP or TLS connection, the reused one silent half-way to the deadline.", nil, nil)
	descDropped = prometheus.NewDesc("qualifyd_sip_dropped_total",
		"Incoming SIP messages dropped by reason (late, duplicate, wrong_source, mismatch, malformed, oversized, request).",
		[]string{"reason"}, nil)
)

// tableStatuses are the statuses a configured contact can have; Removed
// only appears in events.
var tableStatuses = [...]qualify.Status{qualify.NonQualified, qualify.Reachable, qualify.Unreachable}

// scrapeCollector computes the gauges and the prober counters at scrape
// time from Sources; a nil func exports nothing.
type scrapeCollector struct {
	src Sources
}

// Describe implements prometheus.Collector.
func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descContacts, descRoutable, descDraining, descAoRs, descAvailable, descDrainHeld,
		descInFlight, descRequests, descRetrans, descRedials, descDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Summary != nil {
		collectSummary(ch, c.src.Summary())
	}
	if c.src.InFlight != nil {
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.src.InFlight()))
	}
	if c.src.SIP != nil {
		collectSIP(ch, c.src.SIP())
	}
}

func collectSummary(ch chan<- prometheus.Metric, s engine.Summary) {
	for _, st := range tableStatuses {
		ch <- prometheus.MustNewConstMetric(descContacts, prometheus.GaugeValue, float64(s.ByStatus[st]), st.String())
	}
	ch <- prometheus.MustNewConstMetric(descRoutable, prometheus.GaugeValue, float64(s.Routable))
	ch <- prometheus.MustNewConstMetric(descDraining, prometheus.GaugeValue, float64(s.Draining))
	ch <- prometheus.MustNewConstMetric(descAoRs, prometheus.GaugeValue, float64(s.AoRs))
	ch <- prometheus.MustNewConstMetric(descAvailable, prometheus.GaugeValue, float64(s.AoRsAvailable))
	ch <- prometheus.MustNewConstMetric(descDrainHeld, prometheus.GaugeValue, float64(s.AoRsDrainHeld))
}

func collectSIP(ch chan<- prometheus.Metric, s SIPStats) {
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(descRetrans, prometheus.CounterValue, float64(s.Retransmissions))
	ch <- prometheus.MustNewConstMetric(descRedials, prometheus.CounterValue, float64(s.Redials))
	for reason, n := range s.Dropped {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(n), reason)
	}
}
