package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func newMetrics(t *testing.T, opts Options) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// newWatched is newMetrics with the scrape-time series of src.
func newWatched(t *testing.T, opts Options, src Sources) (*Metrics, *prometheus.Registry) {
	t.Helper()
	m, reg := newMetrics(t, opts)
	if err := m.Watch(reg, src); err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestNewNeedsRegisterer(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}

func TestRegisteringTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, Options{}); err == nil {
		t.Fatal("second New on one registry succeeded")
	}
}

func TestProbesByResultAndReason(t *testing.T) {
	m, reg := newMetrics(t, Options{})
	ok := qualify.Result{Code: 200, RTT: 3 * time.Millisecond, DNS: 2 * time.Millisecond}
	m.ObserveProbe("pbx07", ok, true, qualify.ReasonNone)
	m.ObserveProbe("pbx07", qualify.Result{Reason: qualify.ReasonTimeout}, false, qualify.ReasonTimeout)
	m.ObserveProbe("pbx07", qualify.Result{Reason: qualify.ReasonTimeout}, false, qualify.ReasonTimeout)
	m.ObserveProbe("pbx07", qualify.Result{Code: 503, RTT: time.Millisecond}, false, qualify.ReasonStatus)
	want := `
# HELP qualifyd_probes_total Applied probes by verdict: result success (reason none), failure (reason timeout, transport, status or dns) or draining (a 503 with Retry-After).
# TYPE qualifyd_probes_total counter
qualifyd_probes_total{reason="dns",result="failure"} 0
qualifyd_probes_total{reason="draining",result="draining"} 0
qualifyd_probes_total{reason="none",result="success"} 1
qualifyd_probes_total{reason="status",result="failure"} 1
qualifyd_probes_total{reason="timeout",result="failure"} 2
qualifyd_probes_total{reason="transport",result="failure"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_probes_total"); err != nil {
		t.Fatal(err)
	}
	checkHistogram(t, reg, "qualifyd_probe_rtt_seconds", 1, 0.003)
	checkHistogram(t, reg, "qualifyd_probe_dns_seconds", 1, 0.002)
}

func TestLatenessClampsEarlyStarts(t *testing.T) {
	m, reg := newMetrics(t, Options{})
	m.ObserveLateness(-time.Second)
	m.ObserveLateness(250 * time.Millisecond)
	checkHistogram(t, reg, "qualifyd_schedule_lateness_seconds", 2, 0.25)
}

// checkHistogram checks the sample count and sum of an unlabelled histogram.
func checkHistogram(t *testing.T, reg *prometheus.Registry, name string, count uint64, sum float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != count || h.GetSampleSum() != sum {
			t.Fatalf("%s: count %d sum %v, want %d %v", name, h.GetSampleCount(), h.GetSampleSum(), count, sum)
		}
		if len(h.GetBucket()) != len(Buckets) {
			t.Fatalf("%s: %d buckets", name, len(h.GetBucket()))
		}
		return
	}
	t.Fatalf("%s not gathered", name)
}

func TestEvents(t *testing.T) {
	m, reg := newMetrics(t, Options{})
	m.ObserveEvent(engine.Event{Kind: engine.StatusChanged, From: qualify.NonQualified, To: qualify.Reachable})
	m.ObserveEvent(engine.Event{Kind: engine.StatusChanged, From: qualify.Reachable, To: qualify.Unreachable})
	m.ObserveEvent(engine.Event{Kind: engine.StatusChanged, From: qualify.Reachable, To: qualify.Unreachable})
	m.ObserveEvent(engine.Event{Kind: engine.ProbeFailed, From: qualify.Reachable, To: qualify.Reachable})
	m.ObserveEvent(engine.Event{Kind: engine.AvailabilityChanged, Available: false})
	m.ObserveEvent(engine.Event{Kind: engine.StatusChanged, From: 9, To: 1}) // ignored
	tests := []struct {
		c    prometheus.Counter
		want float64
	}{
		{m.changes[qualify.NonQualified][qualify.Reachable], 1},
		{m.changes[qualify.Reachable][qualify.Unreachable], 2},
		{m.changes[qualify.Reachable][qualify.Reachable], 0},
		{m.available[0], 1},
		{m.available[1], 0},
	}
	for i, tt := range tests {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: %v, want %v", i, got, tt.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "qualifyd_status_changes_total"); n != statuses*statuses {
		t.Fatalf("%d status change series, want %d", n, statuses*statuses)
	}
}

func TestScrapeGauges(t *testing.T) {
	sum := engine.Summary{ByStatus: [4]int{1, 5, 2, 0}, Routable: 6, AoRs: 3, AoRsAvailable: 2, Draining: 1, AoRsDrainHeld: 1}
	sip := SIPStats{Requests: 10, Retransmissions: 4, Redials: 3, Dropped: map[string]uint64{"late": 2, "malformed": 1}}
	_, reg := newWatched(t, Options{Version: "v1.2.3"}, Sources{
		Summary:  func() engine.Summary { return sum },
		SIP:      func() SIPStats { return sip },
		InFlight: func() int { return 7 },
	})
	want := `
# HELP qualifyd_aors Configured AoRs.
# TYPE qualifyd_aors gauge
qualifyd_aors 3
# HELP qualifyd_aors_available AoRs with at least one routable contact.
# TYPE qualifyd_aors_available gauge
qualifyd_aors_available 2
# HELP qualifyd_aors_unavailable_draining AoRs without a routable contact while one of theirs drains: out of routing at a peer's request, not for a failure.
# TYPE qualifyd_aors_unavailable_draining gauge
qualifyd_aors_unavailable_draining 1
# HELP qualifyd_contacts Configured contacts by status (NonQualified, Reachable, Unreachable).
# TYPE qualifyd_contacts gauge
qualifyd_contacts{status="NonQualified"} 1
qualifyd_contacts{status="Reachable"} 5
qualifyd_contacts{status="Unreachable"} 2
# HELP qualifyd_contacts_routable Contacts that may carry calls: not Unreachable nor draining, or latency-only.
# TYPE qualifyd_contacts_routable gauge
qualifyd_contacts_routable 6
# HELP qualifyd_contacts_draining Contacts whose peer asked for a pause (503 with Retry-After), out of routing until it ends.
# TYPE qualifyd_contacts_draining gauge
qualifyd_contacts_draining 1
# HELP qualifyd_probes_in_flight Probes running now.
# TYPE qualifyd_probes_in_flight gauge
qualifyd_probes_in_flight 7
# HELP qualifyd_sip_dropped_total Incoming SIP messages dropped by reason (late, duplicate, wrong_source, mismatch, malformed, oversized, request).
# TYPE qualifyd_sip_dropped_total counter
qualifyd_sip_dropped_total{reason="late"} 2
qualifyd_sip_dropped_total{reason="malformed"} 1
# HELP qualifyd_sip_requests_total SIP OPTIONS transactions sent (first transmissions).
# TYPE qualifyd_sip_requests_total counter
qualifyd_sip_requests_total 10
# HELP qualifyd_sip_retransmissions_total SIP OPTIONS retransmissions over UDP (RFC 3261 Timer E).
# TYPE qualifyd_sip_retransmissions_total counter
qualifyd_sip_retransmissions_total 4
# HELP qualifyd_sip_redials_total SIP OPTIONS sent again on a fresh TCP or TLS connection, the reused one silent half-way to the deadline.
# TYPE qualifyd_sip_redials_total counter
qualifyd_sip_redials_total 3
`
	names := []string{"qualifyd_aors", "qualifyd_aors_available", "qualifyd_aors_unavailable_draining", "qualifyd_contacts", "qualifyd_contacts_routable",
		"qualifyd_contacts_draining", "qualifyd_probes_in_flight", "qualifyd_sip_dropped_total", "qualifyd_sip_requests_total", "qualifyd_sip_retransmissions_total", "qualifyd_sip_redials_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "qualifyd_build_info"); n != 1 {
		t.Fatalf("build_info series %d", n)
	}
}

func TestNoScrapeFuncsExportNoGauges(t *testing.T) {
	_, reg := newWatched(t, Options{}, Sources{})
	if n := testutil.CollectAndCount(reg, "qualifyd_contacts", "qualifyd_aors", "qualifyd_sip_requests_total",
		"qualifyd_build_info", "qualifyd_aor_probes_total"); n != 0 {
		t.Fatalf("%d series without scrape funcs", n)
	}
}

func TestLint(t *testing.T) {
	_, reg := newWatched(t, Options{PerAoR: true, Version: "x"}, Sources{Summary: func() engine.Summary { return engine.Summary{} },
		SIP: func() SIPStats { return SIPStats{} }, InFlight: func() int { return 0 }})
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
