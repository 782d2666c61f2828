package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNodeLogReadsStatusLines feeds the daemon's text lines, split across
// writes, and checks what the cluster bench pairs: own and cluster
// Unreachable times by contact key, Reachable counts, the leadership edge.
func TestNodeLogReadsStatusLines(t *testing.T) {
	l := newNodeLog()
	in := "[2026-12-01 20:31:04.327] qualifyd: cluster: joined as a: the cluster's verdicts read back\n" +
		"[2026-12-01 20:31:05.000] qualifyd: cluster: this node leads: it runs the sinks\n" +
		"[2026-12-01 20:31:06.100] Contact c1/sip:c1@127.0.0.1:5 is now Reachable.  RTT: 0.100 msec\n" +
		"[2026-12-01 20:31:06.101] qualifyd: cluster: Contact c1/sip:c1@127.0.0.1:5 is now Reachable (3 of 3 vantages: a=Reachable b=Reachable c=Reachable)\n" +
		"[2026-12-01 20:31:07.328] Endpoint c1 is now Unreachable\n" +
		"[2026-12-01 20:31:07.328] Contact c1/sip:c1@127.0.0.1:5 is now Unreachable.  RTT: 0.000 msec\n" +
		"[2026-12-01 20:31:07.301] qualifyd: cluster: Contact c1/sip:c1@127.0.0.1:5 is now Unreachable (2 of 3 vantages: a=NonQualified b=Unreachable c=Unreachable)\n" +
		"[2026-12-01 20:31:08.000] Contact c2/sip:c2@127.0.0.1:5 qualify failed (timeout): 1/3 failures, retrying in 2s\n"
	for _, part := range []string{in[:50], in[50:333], in[333:]} {
		if _, err := l.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if up, cup, down, cdown := l.counts(); up != 1 || cup != 1 || down != 1 || cdown != 1 {
		t.Fatalf("counts %d %d %d %d, want 1 1 1 1", up, cup, down, cdown)
	}
	own, cluster := l.downTimes()
	at := func(s string) time.Time {
		v, _ := time.ParseInLocation(stampLayout, s, time.Local)
		return v
	}
	key := "c1/sip:c1@127.0.0.1:5"
	if !own[key].Equal(at("2026-12-01 20:31:07.328")) || !cluster[key].Equal(at("2026-12-01 20:31:07.301")) {
		t.Fatalf("own %v cluster %v", own, cluster)
	}
	if ok, since := l.leads(); !ok || !since.Equal(at("2026-12-01 20:31:05.000")) {
		t.Fatalf("leads %v since %v", ok, since)
	}
	_, _ = l.Write([]byte("[2026-12-01 20:31:09.000] qualifyd: cluster: this node stopped leading: its sinks stopped, released nothing\n"))
	if ok, _ := l.leads(); ok {
		t.Fatal("still leading after the stopped line")
	}
}

// TestHookReceiverCountsChanges checks that only a body whose level
// differs from the one held counts as a change of the receiver.
func TestHookReceiverCountsChanges(t *testing.T) {
	h := &hookReceiver{held: map[string]string{}, stats: map[string]*hookStats{}}
	now := time.Now()
	h.record("a", hookBody{Kind: "contact", AoR: "c1", URI: "sip:c1@h", To: "down"}, now)
	h.record("b", hookBody{Kind: "contact", AoR: "c1", URI: "sip:c1@h", To: "down"}, now)
	h.record("b", hookBody{Kind: "heartbeat"}, now)
	h.record("b", hookBody{Kind: "aor", AoR: "c1", To: "up"}, now)
	if st := h.node("b"); st.Changes != 2 || st.Changed != 1 || st.Beats != 1 {
		t.Fatalf("b: %+v, want 2 changes, 1 changing, 1 heartbeat", st)
	}
	if d := h.heldDown(); d != 1 {
		t.Fatalf("held down %d, want 1", d)
	}
}

// TestPerNodeMatchesTheProbeRate: the single node gets as many contacts
// as a node of the cluster probes.
func TestPerNodeMatchesTheProbeRate(t *testing.T) {
	for _, c := range []struct{ contacts, vantages, want int }{
		{100_000, 3, 100_000}, {100_000, 2, 66_667}, {100_000, 1, 33_333}, {20, 2, 13},
	} {
		if got := perNode(c.contacts, c.vantages); got != c.want {
			t.Errorf("perNode(%d, %d) = %d, want %d", c.contacts, c.vantages, got, c.want)
		}
	}
}

// TestStoreBytesCountsTheVoteStreams: only the votes' and verdicts'
// streams of every node's store count, so that the members' renewals
// never keep the cluster from being quiet.
func TestStoreBytesCountsTheVoteStreams(t *testing.T) {
	r := &clusterRun{dir: t.TempDir()}
	write := func(node, stream, file string, n int) {
		dir := filepath.Join(r.store(node), "jetstream", "$G", "streams", stream, "msgs")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "KV_qualifyd_votes", "1.blk", 100)
	write("b", "KV_qualifyd_verdicts", "1.blk", 20)
	write("c", "KV_qualifyd_members", "1.blk", 7)
	if got := r.storeBytes(); got != 120 {
		t.Fatalf("storeBytes %d, want 120 (votes of a and verdicts of b, not c's members)", got)
	}
	write("c", "KV_qualifyd_votes", "2.blk", 3)
	if got := r.storeBytes(); got != 123 {
		t.Fatalf("storeBytes %d after c's votes grew, want 123", got)
	}
}
