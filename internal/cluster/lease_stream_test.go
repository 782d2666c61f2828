package cluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	lead := oneLeader(t, nodes)
	const stream = "KV_" + bucketLease
	before := lead.c.Stats().HandedOn // before the move: the holder may hand it on at once
	waitFor(t, 10*testTTL, "the holder's server leads the lease's stream", func() bool {
		if streamLeader(t, lead, stream) == lead.cfg.Self {
			return true
		}
		body, _ := json.Marshal(stepDownRequest{Placement: placement{Preferred: lead.cfg.Self}})
		_, _ = lead.c.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, body, testTTL/3) // the JetStream API's step-down, to a preferred server
		return streamLeader(t, lead, stream) == lead.cfg.Self
	})
	took := waitFor(t, 10*testTTL, "the holder hands the stream on", func() bool {
		l := streamLeader(t, lead, stream)
		return lead.c.Stats().HandedOn > before && l != "" && l != lead.cfg.Self
	})
	t.Logf("the holder %s handed the lease's stream on %v after it led it", lead.cfg.Self, took)
	if !lead.c.Leading() {
		t.Fatal("the holder lost the lease while its stream moved")
	}
}

// TestHandOnTarget: a stream goes only to a replica that is current, not
// offline and heard from within handOnActive; a cut server NATS still
// counts healthy (seen 2 s ago) is passed over.
func TestHandOnTarget(t *testing.T) {
	peer := func(name string, current, offline bool, active time.Duration) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Current: current, Offline: offline, Active: active}
	}
	tests := []struct {
		name     string
		replicas []*jetstream.PeerInfo
		want     string
	}{
		{"none", nil, ""},
		{"the first fresh one", []*jetstream.PeerInfo{peer("b", true, false, 200*time.Millisecond), peer("c", true, false, 100*time.Millisecond)}, "b"},
		{"the cut one passed over", []*jetstream.PeerInfo{peer("b", true, false, 2*time.Second), peer("c", true, false, 900*time.Millisecond)}, "c"},
		{"at the bound", []*jetstream.PeerInfo{peer("b", true, false, handOnActive)}, "b"},
		{"lagging", []*jetstream.PeerInfo{peer("b", false, false, 0)}, ""},
		{"offline", []*jetstream.PeerInfo{peer("b", true, true, 0)}, ""},
		{"unnamed", []*jetstream.PeerInfo{peer("", true, false, 0), nil}, ""},
		{"every one stale", []*jetstream.PeerInfo{peer("b", true, false, 2*time.Second), peer("c", true, false, 3*time.Second)}, ""},
	}
	for _, tt := range tests {
		if got := handOnTarget(tt.replicas); got != tt.want {
			t.Errorf("%s: handOnTarget = %q, want %q", tt.name, got, tt.want)
		}
	}
}
