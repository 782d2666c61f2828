package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// showCluster prints this node's view of its cluster (GET
// /api/v1/cluster): this node, the leader, whether it is in the cluster,
// the quorum rule, then a line per configured node and the nodes whose
// configuration disagrees with the leader's.
func showCluster(ctx context.Context, c *apiClient, w io.Writer, now time.Time) error {
	var v api.Cluster
	if err := c.do(ctx, "GET", "/api/v1/cluster", &v); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n     Node:  %s\n   Leader:  %s\n  Cluster:  %s\n   Quorum:  %s of %d vantages\n",
		v.Node, leaderText(&v), inClusterText(&v), v.Quorum, v.Vantages)
	width := 20
	for _, m := range v.Members {
		width = max(width, len(m.Name))
	}
	head := fmt.Sprintf("   Member:  <Name%s>  <State>  <For.......>  <Probes>", strings.Repeat(".", width-6))
	fmt.Fprintf(w, "\n%s\n%s\n\n", head, strings.Repeat("=", len(head)))
	for _, m := range v.Members {
		state := "down"
		if m.Up {
			state = "up"
		}
		fmt.Fprintf(w, "   Member:  %-*s  %-7s  %-12s  %8d\n", width, m.Name, state, ago(m.Since, now), m.Probes)
	}
	disagree := "none"
	if len(v.Disagree) > 0 {
		disagree = strings.Join(v.Disagree, ", ") + " (the configuration differs from the leader's)"
	}
	fmt.Fprintf(w, "\nDisagreeing: %s\nObjects found: %d\n\n", disagree, len(v.Members))
	return nil
}

// leaderText is the leader's name, "(this node)" when it is this one.
func leaderText(v *api.Cluster) string {
	switch {
	case v.Leading:
		return v.Leader + " (this node)"
	case v.Leader != "":
		return v.Leader
	case !v.InCluster:
		return "unknown (not in the cluster)"
	}
	return "none"
}

// inClusterText says whether this node is in the cluster, and what that
// means for the sinks.
func inClusterText(v *api.Cluster) string {
	switch {
	case !v.InCluster:
		return "NOT in the cluster: this node lost NATS, or NATS its JetStream quorum; it shows its own view and pushes nothing"
	case v.Leading:
		return "in the cluster, leading: this node pushes the sinks"
	}
	return "in the cluster"
}

// clusterHeader heads the columns a contacts table gains in cluster mode.
const clusterHeader = "  <Cluster> <Votes...>"

// clusterMode reports whether the contacts carry the cluster's status:
// whether the daemon runs in cluster mode.
func clusterMode(cs []api.Contact) bool {
	for i := range cs {
		if cs[i].ClusterStatus != "" {
			return true
		}
	}
	return false
}

// clusterColumns are c's columns under clusterHeader: the cluster's
// status and each vantage's, as node:status, in short labels, then
// "(not probed here)" for a contact another node probes.
func clusterColumns(c *api.Contact) string {
	votes := make([]string, len(c.Votes))
	for i, v := range c.Votes {
		votes[i] = v.Node + ":" + shortLabel(v.Status)
	}
	if len(votes) == 0 {
		votes = []string{"-"}
	}
	here := ""
	if c.NotProbedHere {
		here = " (not probed here)"
	}
	return fmt.Sprintf("  %-9s %s%s", shortLabel(c.ClusterStatus), strings.Join(votes, ","), here)
}
