package web

import (
	"net/http"

	"github.com/qualifyd/qualifyd/internal/api"
)

// errNotCluster is the 404 of GET /api/v1/cluster on a single node.
const errNotCluster = "not a cluster: qualifyd runs without a type=cluster section"

// cluster serves GET /api/v1/cluster: this node's view of its cluster, or
// 404 outside cluster mode.
func (s *Server) cluster(w http.ResponseWriter, _ *http.Request) {
	v, ok := s.clusterView()
	if !ok {
		writeError(w, http.StatusNotFound, errNotCluster)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// clusterView returns the Cluster hook's view, its lists never null;
// false outside cluster mode.
func (s *Server) clusterView() (api.Cluster, bool) {
	if s.cfg.Cluster == nil {
		return api.Cluster{}, false
	}
	v, ok := s.cfg.Cluster()
	if !ok {
		return api.Cluster{}, false
	}
	if v.Members == nil {
		v.Members = []api.ClusterMember{}
	}
	if v.Disagree == nil {
		v.Disagree = []string{}
	}
	if v.Foreign == nil {
		v.Foreign = []string{}
	}
	return v, true
}
