package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterStats is a cluster node's state that the metrics export, as
// the node sees it at the scrape.
type ClusterStats struct {
	// Reachable and Unreachable count the verdicts the node took back
	// from the cluster when it joined, by status; zero until it joins.
	Reachable, Unreachable int
	// InCluster is whether the node's membership was renewed within its
	// deadline (false: it lost NATS, or NATS its JetStream quorum).
	InCluster bool
	// Leading is whether the node holds the sink lease now.
	Leading bool
	// Up and Down count the configured nodes by state.
	Up, Down int
	// Probed counts the contacts this node probes (its share of them when
	// vantages is less than the nodes).
	Probed int
	// Stale and Lagged count the watches started again, by reason: every
	// watch because the members watch stopped delivering the node's own
	// renewals, or one watch because it lagged behind its bucket.
	Stale, Lagged uint64
	// Pending counts the node's votes (and, leading, verdicts) NATS has
	// not taken yet.
	Pending int
	// StoreOK is whether the node can store: false while its embedded
	// server's JetStream is disabled (a full disk), and the node out of
	// the cluster.
	StoreOK bool
	// Foreign counts the nodes not in nodes= whose keys this node has
	// seen in the buckets since it started (another cluster's on a
	// shared NATS, or a node removed from nodes=).
	Foreign int
	// HandedOn counts the leaderships of the buckets' streams the node's
	// embedded server handed on to another node's server.
	HandedOn uint64
	// CertExpiry is when the node's certificate (tls_cert, or nats_cert
	// with an external NATS) expires, as last read; zero without one
	// (no series).
	CertExpiry time.Time
}

var (
	descTakenBack = prometheus.NewDesc("qualifyd_cluster_verdicts_taken_back",
		"Verdicts this node took back from the cluster when it joined, by status (Reachable, Unreachable); 0 until it joins.", []string{"status"}, nil)
	descInCluster = prometheus.NewDesc("qualifyd_cluster_in_cluster",
		"1 while this node is in the cluster: its membership renewed within its deadline; 0 when it lost NATS or NATS its JetStream quorum.", nil, nil)
	descLeading = prometheus.NewDesc("qualifyd_cluster_leading",
		"1 while this node holds the lease and runs the sinks.", nil, nil)
	descMembers = prometheus.NewDesc("qualifyd_cluster_members",
		"The configured nodes by state (up, down) as this node sees them.", []string{"state"}, nil)
	descProbed = prometheus.NewDesc("qualifyd_cluster_contacts_probed",
		"Contacts this node probes as one of their vantages.", nil, nil)
	descRestarts = prometheus.NewDesc("qualifyd_cluster_watch_restarts_total",
		"Bucket watches started again, by reason: stale (every watch, the members watch stopped delivering this node's renewals), lagged (one watch behind its bucket).", []string{"reason"}, nil)
	descCertExpiry = prometheus.NewDesc("qualifyd_cluster_cert_expiry_timestamp_seconds",
		"When this node's cluster certificate (tls_cert, or nats_cert) expires, as last read at start or reload, in seconds since the epoch; absent without one.", nil, nil)
	descHandedOn = prometheus.NewDesc("qualifyd_cluster_stream_handoffs_total",
		"Leaderships of the cluster buckets' streams this node's embedded server handed on to another node's server, at the lease's renewals; 0 with an external NATS.", nil, nil)
	descStoreOK = prometheus.NewDesc("qualifyd_cluster_store_ok",
		"1 while this node can store; 0 while its embedded NATS server's JetStream is disabled (its store full or failing): it has given up the lease and is out of the cluster until it can store again.", nil, nil)
	descForeign = prometheus.NewDesc("qualifyd_cluster_foreign_nodes",
		"Nodes not in nodes= whose membership, votes or lease this node has seen in the cluster's buckets since it started: they never count, and the leader removes their keys.", nil, nil)
	descPending = prometheus.NewDesc("qualifyd_cluster_votes_pending",
		"This node's votes (and, leading, verdicts) that NATS has not taken yet; grows while NATS is away.", nil, nil)
)

// WatchCluster registers with reg a cluster node's series, read from
// state at scrape time; a single node registers none.
func (m *Metrics) WatchCluster(reg prometheus.Registerer, state func() ClusterStats) error {
	if reg == nil || state == nil {
		return errors.New("metrics: no registerer or no cluster state")
	}
	return reg.Register(funcCollector{
		descs: []*prometheus.Desc{descTakenBack, descInCluster, descLeading, descMembers, descProbed, descRestarts, descPending, descHandedOn, descForeign, descStoreOK, descCertExpiry},
		collect: func(ch chan<- prometheus.Metric) {
			s := state()
			ch <- prometheus.MustNewConstMetric(descTakenBack, prometheus.GaugeValue, float64(s.Reachable), "Reachable")
			ch <- prometheus.MustNewConstMetric(descTakenBack, prometheus.GaugeValue, float64(s.Unreachable), "Unreachable")
			collectClusterState(ch, s)
		},
	})
}

// collectClusterState sends the node's cluster series other than the
// verdicts taken back.
func collectClusterState(ch chan<- prometheus.Metric, s ClusterStats) {
	ch <- prometheus.MustNewConstMetric(descInCluster, prometheus.GaugeValue, gauge(s.InCluster))
	ch <- prometheus.MustNewConstMetric(descLeading, prometheus.GaugeValue, gauge(s.Leading))
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(s.Up), "up")
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(s.Down), "down")
	ch <- prometheus.MustNewConstMetric(descProbed, prometheus.GaugeValue, float64(s.Probed))
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(s.Stale), "stale")
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(s.Lagged), "lagged")
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(descHandedOn, prometheus.CounterValue, float64(s.HandedOn))
	ch <- prometheus.MustNewConstMetric(descForeign, prometheus.GaugeValue, float64(s.Foreign))
	ch <- prometheus.MustNewConstMetric(descStoreOK, prometheus.GaugeValue, gauge(s.StoreOK))
	if !s.CertExpiry.IsZero() {
		ch <- prometheus.MustNewConstMetric(descCertExpiry, prometheus.GaugeValue, float64(s.CertExpiry.Unix()))
	}
}
