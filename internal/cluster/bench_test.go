package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// BenchmarkVerdictLatency measures, on three embedded servers on
// loopback, the time from the second vantage's Report to the cluster's
// verdict on a third node: vantage a says Unreachable (and c has counted
// it), then vantage b does, and c's Verdict hook fires (majority of 3).
// It reports the p50 and p99 of those times.
func BenchmarkVerdictLatency(b *testing.B) {
	nodes := benchCluster(b)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		contact := fmt.Sprintf("bench/sip:10.1.%d.%d:5060", i/256, i%256)
		i++
		nodes[0].c.Report(contact, qualify.Unreachable)
		waitFor(b, testTTL, "c counts a's vote", func() bool { return nodes[2].vote(contact, "a") == qualify.Unreachable })
		start := time.Now()
		nodes[1].c.Report(contact, qualify.Unreachable)
		var v Verdict
		select {
		case v = <-nodes[2].verdicts:
		case <-time.After(2 * testTTL):
			c := nodes[2].c
			c.l.mu.Lock()
			b.Fatalf("no verdict on c for %s: live %v votes %v status %v members %+v", contact, c.l.tally.live, c.l.tally.votes[contact], c.l.tally.status[contact], c.l.members)
		}
		lat = append(lat, time.Since(start))
		if v.Contact != contact || v.Status != qualify.Unreachable {
			b.Fatalf("verdict %+v", v)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// benchCluster is startCluster for a benchmark.
func benchCluster(b *testing.B) []*testNode {
	b.Helper()
	var nodes []*testNode
	for _, cfg := range testConfigs(b, 3, Majority) {
		nodes = append(nodes, startNode(b, cfg))
	}
	for _, nd := range nodes {
		waitFor(b, 30*time.Second, "members up", func() bool { return upCount(nd.c.View()) == 3 })
		<-nd.c.Ready()
	}
	return nodes
}
