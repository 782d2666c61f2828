package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// flip makes the responder drop a tenth of the contacts for every node,
// waits until the leader has logged the cluster's Unreachable of each
// and every vantage its own, and pairs them per contact.
func (r *clusterRun) flip(ctx context.Context, nodes []*clusterNode, lead *clusterNode) error {
	want := flipped(r.o.contacts)
	at := time.Now()
	if err := r.resp.flip(true); err != nil {
		return err
	}
	bound := r.o.freq + r.o.timeout + time.Minute
	err := pollUntil(ctx, bound, func() bool {
		owns := 0
		for _, n := range nodes {
			_, _, own, cl := n.log.counts()
			if n == lead && cl < want {
				return false
			}
			owns += own
		}
		return owns >= want*r.o.vantages
	})
	if err != nil {
		return fmt.Errorf("flip of %d contacts: %w", want, err)
	}
	r.rep.Flip = pairFlip(nodes, lead, want, at)
	wantHook := flipped(r.o.hookAoRs)
	if err := pollUntil(ctx, 30*time.Second, func() bool { return r.hook.heldDown() >= wantHook }); err != nil {
		return fmt.Errorf("the webhook receiver holds %d contacts down, want %d: %w", r.hook.heldDown(), wantHook, err)
	}
	return nil
}

// pairFlip measures, per contact the leader logged down, the time from
// the second vantage's own line to the leader's cluster line.
func pairFlip(nodes []*clusterNode, lead *clusterNode, want int, at time.Time) flipReport {
	rep := flipReport{Contacts: want}
	owns := make([]map[string]time.Time, len(nodes))
	for i, n := range nodes {
		owns[i], _ = n.log.downTimes()
	}
	_, cluster := lead.log.downTimes()
	var lat []time.Duration
	var last time.Time
	for key, ct := range cluster {
		var times []time.Time
		for _, own := range owns {
			if t, ok := own[key]; ok {
				times = append(times, t)
			}
		}
		if len(times) < 2 {
			continue
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		lat = append(lat, ct.Sub(times[1]))
		if ct.After(last) {
			last = ct
		}
	}
	rep.Paired = len(lat)
	if len(lat) == 0 {
		return rep
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
	rep.P50Ms, rep.P99Ms, rep.MinMs, rep.MaxMs = ms(q(0.5)), ms(q(0.99)), ms(lat[0]), ms(lat[len(lat)-1])
	rep.SpreadS = last.Sub(at).Seconds()
	return rep
}

// failover kills the leader with SIGKILL and times, from the kill, the
// survivors' agreement on a new leader (GET /api/v1/cluster), its first
// body to the webhook receiver, and its changes until they stop.
func (r *clusterRun) failover(ctx context.Context, nodes []*clusterNode, lead *clusterNode) error {
	f := &r.rep.Failover
	f.LeaseTTLS, f.MemberTTLS, f.OldLeader = float64(r.o.leaseTTL), float64(r.o.memberTTL), lead.name
	f.HookWantsDown, f.HookObjects = flipped(r.o.hookAoRs), 2*r.o.hookAoRs
	survivors := slices.DeleteFunc(slices.Clone(nodes), func(n *clusterNode) bool { return n == lead })
	kill := time.Now()
	if err := lead.d.cmd.Process.Kill(); err != nil {
		return err
	}
	var next *clusterNode
	err := pollUntil(ctx, time.Minute+4*time.Duration(r.o.leaseTTL)*time.Second, func() bool {
		next = agreedLeader(survivors)
		return next != nil
	})
	if err != nil {
		return fmt.Errorf("no new leader after the kill: %w", err)
	}
	f.NewLeader, f.LeaderS, f.LeaderFrom = next.name, time.Since(kill).Seconds(), "GET /api/v1/cluster"
	if _, err := next.view(); errors.Is(err, errNoClusterRoute) {
		_, at := next.log.leads()
		f.LeaderS, f.LeaderFrom = at.Sub(kill).Seconds(), "its log's \"this node leads\" line"
	}
	err = pollUntil(ctx, time.Minute, func() bool { return !r.hook.node(next.name).First.IsZero() })
	if err != nil {
		return fmt.Errorf("new leader %s: no body to the webhook: %w", next.name, err)
	}
	r.awaitQuiet(ctx, next.name)
	st := r.hook.node(next.name)
	f.FirstPushS = st.First.Sub(kill).Seconds()
	if st.Changes > 0 {
		f.FirstChangeS = st.FirstChange.Sub(kill).Seconds()
	}
	f.Changes, f.Changed, f.Heartbeats, f.HookHeldDown = st.Changes, st.Changed, st.Beats, r.hook.heldDown()
	return nil
}

// quietFor is how long the new leader's sink must send no change for its
// pushes to count as over.
const quietFor = 5 * time.Second

// awaitQuiet waits until node's sink has sent no change for quietFor, at
// most a minute.
func (r *clusterRun) awaitQuiet(ctx context.Context, node string) {
	last, since := -1, time.Now()
	_ = pollUntil(ctx, time.Minute, func() bool {
		if n := r.hook.node(node).Changes; n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quietFor
	})
}

// printCluster prints one table per measure.
func printCluster(w io.Writer, r clusterReport) {
	fmt.Fprintf(w, "cost: %d contacts on a %d-node cluster, vantages=%d (each node probes about %d), F %.0fs, window %.0fs from the stores' quiet (%.1f s after the first round) plus the settle time;\n"+
		"single node (before, after) of %d contacts, the probe rate of a node; RSS per contact is over the contacts a process holds (every contact for a node of the cluster)\n\n",
		r.Contacts, len(r.Nodes), r.Vantages, r.SingleContacts, r.FrequencyS, r.DurationS, r.QuietS, r.SingleContacts)
	fmt.Fprintln(w, "| run | probes/s | CPU per probe | CPU | RSS per contact | heap per contact | CPU ratio | RSS ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, s := range r.Single {
		fmt.Fprintf(w, "| single %d | %.0f | %.2f us | %.3f cores | %.0f B | %.0f B | | |\n", i+1, s.ProbesPerSecond, s.CPUUsPerProbe, s.CPUCores, s.RSSPerContact, s.HeapPerContact)
	}
	for _, n := range r.Nodes {
		role := "follower"
		if n.Leader {
			role = "leader"
		}
		c := n.Cost
		fmt.Fprintf(w, "| node %s (%s) | %.0f | %.2f us | %.3f cores | %.0f B | %.0f B | %.2f | %.2f |\n", n.Name, role, c.ProbesPerSecond, c.CPUUsPerProbe, c.CPUCores, c.RSSPerContact, c.HeapPerContact, n.CPURatio, n.RSSRatio)
	}
	fl := r.Flip
	fmt.Fprintf(w, "\nverdict latency: %d contacts flipped to dropped for every node, quorum majority; second vantage's own line -> leader's cluster line (1 ms stamps)\n\n", fl.Contacts)
	fmt.Fprintln(w, "| contacts paired | p50 | p99 | min | max | flip to last cluster line |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| %d of %d | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.1f s |\n", fl.Paired, fl.Contacts, fl.P50Ms, fl.P99Ms, fl.MinMs, fl.MaxMs, fl.SpreadS)
	f := r.Failover
	fmt.Fprintf(w, "\nfailover: kill -9 of the leader %s; lease_ttl %.0fs, member_ttl %.0fs; webhook receiver of %d objects, %d contacts held down; times from the kill\n\n",
		f.OldLeader, f.LeaseTTLS, f.MemberTTLS, f.HookObjects, f.HookWantsDown)
	fmt.Fprintf(w, "new leader read from %s\n\n", f.LeaderFrom)
	fmt.Fprintln(w, "| new leader | agreed by the survivors | first body | first change | changes | of them changing the receiver | heartbeats | contacts held down after |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	first := "none"
	if f.Changes > 0 {
		first = fmt.Sprintf("%.2f s", f.FirstChangeS)
	}
	fmt.Fprintf(w, "| %s | %.2f s | %.2f s | %s | %d | %d | %d | %d |\n", f.NewLeader, f.LeaderS, f.FirstPushS, first, f.Changes, f.Changed, f.Heartbeats, f.HookHeldDown)
	printTLSRuns(w, r)
}
