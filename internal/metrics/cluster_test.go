package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestClusterSeries: a cluster node's series are read from its state at
// each scrape, with the state's values.
func TestClusterSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ClusterStats{Reachable: 4, Unreachable: 1, InCluster: true, Leading: true, Up: 2, Down: 1, Probed: 7, Stale: 3, Lagged: 5, Pending: 6, HandedOn: 8}
	if err := m.WatchCluster(reg, func() ClusterStats { return s }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP qualifyd_cluster_contacts_probed Contacts this node probes as one of their vantages.
# TYPE qualifyd_cluster_contacts_probed gauge
qualifyd_cluster_contacts_probed 7
# HELP qualifyd_cluster_in_cluster 1 while this node is in the cluster: its membership renewed within its deadline; 0 when it lost NATS or NATS its JetStream quorum.
# TYPE qualifyd_cluster_in_cluster gauge
qualifyd_cluster_in_cluster 1
# HELP qualifyd_cluster_leading 1 while this node holds the lease and runs the sinks.
# TYPE qualifyd_cluster_leading gauge
qualifyd_cluster_leading 1
# HELP qualifyd_cluster_members The configured nodes by state (up, down) as this node sees them.
# TYPE qualifyd_cluster_members gauge
qualifyd_cluster_members{state="down"} 1
qualifyd_cluster_members{state="up"} 2
# HELP qualifyd_cluster_stream_handoffs_total Leaderships of the cluster buckets' streams this node's embedded server handed on to another node's server, at the lease's renewals; 0 with an external NATS.
# TYPE qualifyd_cluster_stream_handoffs_total counter
qualifyd_cluster_stream_handoffs_total 8
# HELP qualifyd_cluster_verdicts_taken_back Verdicts this node took back from the cluster when it joined, by status (Reachable, Unreachable); 0 until it joins.
# TYPE qualifyd_cluster_verdicts_taken_back gauge
qualifyd_cluster_verdicts_taken_back{status="Reachable"} 4
qualifyd_cluster_verdicts_taken_back{status="Unreachable"} 1
# HELP qualifyd_cluster_votes_pending This node's votes (and, leading, verdicts) that NATS has not taken yet; grows while NATS is away.
# TYPE qualifyd_cluster_votes_pending gauge
qualifyd_cluster_votes_pending 6
# HELP qualifyd_cluster_watch_restarts_total Bucket watches started again, by reason: stale (every watch, the members watch stopped delivering this node's renewals), lagged (one watch behind its bucket).
# TYPE qualifyd_cluster_watch_restarts_total counter
qualifyd_cluster_watch_restarts_total{reason="lagged"} 5
qualifyd_cluster_watch_restarts_total{reason="stale"} 3
`
	names := []string{"qualifyd_cluster_contacts_probed", "qualifyd_cluster_in_cluster", "qualifyd_cluster_leading", "qualifyd_cluster_members",
		"qualifyd_cluster_stream_handoffs_total", "qualifyd_cluster_verdicts_taken_back", "qualifyd_cluster_votes_pending", "qualifyd_cluster_watch_restarts_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	s = ClusterStats{Down: 3} // out of the cluster: read again at the next scrape
	want = `
# HELP qualifyd_cluster_in_cluster 1 while this node is in the cluster: its membership renewed within its deadline; 0 when it lost NATS or NATS its JetStream quorum.
# TYPE qualifyd_cluster_in_cluster gauge
qualifyd_cluster_in_cluster 0
# HELP qualifyd_cluster_leading 1 while this node holds the lease and runs the sinks.
# TYPE qualifyd_cluster_leading gauge
qualifyd_cluster_leading 0
# HELP qualifyd_cluster_members The configured nodes by state (up, down) as this node sees them.
# TYPE qualifyd_cluster_members gauge
qualifyd_cluster_members{state="down"} 3
qualifyd_cluster_members{state="up"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_cluster_in_cluster", "qualifyd_cluster_leading", "qualifyd_cluster_members"); err != nil {
		t.Fatal(err)
	}
}

// TestClusterCertExpirySeries: the certificate's expiry is exported as
// read at the scrape, and absent without a certificate.
func TestClusterCertExpirySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var s ClusterStats
	if err := m.WatchCluster(reg, func() ClusterStats { return s }); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "qualifyd_cluster_cert_expiry_timestamp_seconds"); err != nil || n != 0 {
		t.Fatalf("without a certificate: %d series, %v; want none", n, err)
	}
	s.CertExpiry = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	want := `
# HELP qualifyd_cluster_cert_expiry_timestamp_seconds When this node's cluster certificate (tls_cert, or nats_cert) expires, as last read at start or reload, in seconds since the epoch; absent without one.
# TYPE qualifyd_cluster_cert_expiry_timestamp_seconds gauge
qualifyd_cluster_cert_expiry_timestamp_seconds 1.8039024e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_cluster_cert_expiry_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
}
