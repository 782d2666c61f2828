package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// The assignment: a node probes the contacts it is a vantage of, by
// rendezvous hashing over the live nodes (cluster.Probes), and keeps the
// others in its table, NonQualified and "not probed here". The engine
// holds the test (SetProbed) and applies it to what a reload adds; the
// Members hook's edges make the node apply the test of the new live set.

// probedBy is the engine's Probed test of a node that sees live up: the
// contacts cluster.Probes gives it. The node counts itself live whatever
// it sees, so that one that lost the cluster keeps probing its share.
func (n *node) probedBy(live []string) engine.Probed {
	if !slices.Contains(live, n.cfg.Self) {
		live = append(slices.Clone(live), n.cfg.Self)
	}
	self, vantages := n.cfg.Self, n.cfg.Vantages
	return func(aor, uri string) bool { return cluster.Probes(ContactKey(aor, uri), live, vantages, self) }
}

// assumed is the live set before the node has seen the members: every
// configured node, the assignment a whole cluster has.
func (n *node) assumed() []string {
	out := make([]string, len(n.cfg.Nodes))
	for i, nd := range n.cfg.Nodes {
		out[i] = nd.Name
	}
	return out
}

// membersEdge is the Members hook: it hands the live set to runAssign.
func (n *node) membersEdge(live []string) {
	n.mu.Lock()
	n.live = live
	n.mu.Unlock()
	select {
	case n.moved <- struct{}{}:
	default:
	}
}

// assignPending applies the live set the Members hook gave before the
// engine runs (the members' first pass comes before Ready), so that the
// first probes are of this node's share.
func (n *node) assignPending() {
	select {
	case <-n.moved:
		n.assignLatest()
	default:
	}
}

// runAssign applies the latest live set the Members hook gave, until ctx
// ends: the engine's assignment changes on each edge, off the hook's
// goroutine, and edges that come during one apply coalesce.
func (n *node) runAssign(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.moved:
		}
		n.assignLatest()
	}
}

// assignLatest assigns the live set the Members hook gave last.
func (n *node) assignLatest() {
	n.mu.Lock()
	live := n.live
	n.mu.Unlock()
	n.assign(live)
}

// assign makes the engine probe this node's share of live, withdraws
// this node's vote of each contact that moves (one taken off must not
// count later, one taken back has no probe of this node's yet), before
// the move, so that the vote of a taken-back contact's first probe comes
// after the withdrawal, and announces how many contacts it probes.
func (n *node) assign(live []string) {
	moves := 0
	probed := n.d.eng.SetProbed(n.probedBy(live), func(aor, uri string, _ bool) {
		n.c.Report(ContactKey(aor, uri), qualify.Removed)
		moves++
	})
	n.c.SetProbes(probed)
	n.d.log.Notice(slog.LevelInfo, fmt.Sprintf("cluster: live nodes %s: this node probes %d contacts (%d moved)",
		strings.Join(live, ","), probed, moves))
}

// announceProbes announces how many contacts this node probes now.
func (n *node) announceProbes() { n.c.SetProbes(n.d.eng.Summary().Probed()) }
