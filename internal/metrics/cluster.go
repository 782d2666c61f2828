package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterStats is a cluster node's state that the metrics export.
type ClusterStats struct {
	// Reachable and Unreachable count the verdicts the node took back
	// from the cluster when it joined, by status; zero until it joins.
	Reachable, Unreachable int
}

var descTakenBack = prometheus.NewDesc("qualifyd_cluster_verdicts_taken_back",
	"Verdicts this node took back from the cluster when it joined, by status (Reachable, Unreachable); 0 until it joins.", []string{"status"}, nil)

// WatchCluster registers with reg a cluster node's series, read from
// state at scrape time; a single node registers none.
func (m *Metrics) WatchCluster(reg prometheus.Registerer, state func() ClusterStats) error {
	if reg == nil || state == nil {
		return errors.New("metrics: no registerer or no cluster state")
	}
	return reg.Register(funcCollector{
		descs: []*prometheus.Desc{descTakenBack},
		collect: func(ch chan<- prometheus.Metric) {
			s := state()
			ch <- prometheus.MustNewConstMetric(descTakenBack, prometheus.GaugeValue, float64(s.Reachable), "Reachable")
			ch <- prometheus.MustNewConstMetric(descTakenBack, prometheus.GaugeValue, float64(s.Unreachable), "Unreachable")
		},
	})
}
