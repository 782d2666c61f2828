package cluster

import (
	"encoding/json"
	"testing"
)

// streamLeader is the server that leads stream now, as n's server says.
func streamLeader(t *testing.T, n *testNode, stream string) string {
	t.Helper()
	js, ctx, cancel := n.jetStream(t)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// TestLeaseHolderHandsItsStreamOn: the lease's stream led by the
// holder's own server (moved there on purpose) is handed to another
// server at the holder's next renewal, so that a kill of the holder never
// waits for a stream leader election before the lease can be taken.
func TestLeaseHolderHandsItsStreamOn(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	waitFor(t, 10*testTTL, "one leader", func() bool { return len(leaders(nodes)) == 1 })
	lead := leaders(nodes)[0]
	const stream = "KV_" + bucketLease
	before := lead.c.stepDowns.Load() // before the move: the holder may hand it on at once
	waitFor(t, 10*testTTL, "the holder's server leads the lease's stream", func() bool {
		if streamLeader(t, lead, stream) == lead.cfg.Self {
			return true
		}
		body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": lead.cfg.Self}})
		_, _ = lead.c.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, body, testTTL/3) // the JetStream API's step-down, to a preferred server
		return streamLeader(t, lead, stream) == lead.cfg.Self
	})
	took := waitFor(t, 10*testTTL, "the holder hands the stream on", func() bool {
		l := streamLeader(t, lead, stream)
		return lead.c.stepDowns.Load() > before && l != "" && l != lead.cfg.Self
	})
	t.Logf("the holder %s handed the lease's stream on %v after it led it", lead.cfg.Self, took)
	if !lead.c.Leading() {
		t.Fatal("the holder lost the lease while its stream moved")
	}
}
