package cluster

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Only the nodes of nodes= take part. On a shared NATS another
// cluster's node (or a node removed from nodes=, whose votes stay
// behind) writes to the same buckets: its membership, its votes and its
// lease are ignored, every node lists it (View.Foreign) and logs it once,
// and the leader removes its keys (ledger.strays), as the nodes that
// count could never tell it to.

// strayed logs and queues what the ledger's outcome o says of a node not
// in nodes=.
func (c *Cluster) strayed(o outcome) {
	if o.Foreign != "" {
		c.notice(slog.LevelWarn, fmt.Sprintf("cluster: node %s is not one of nodes=: its membership, votes and lease are ignored, and the leader removes its keys (another cluster on the same NATS, or a node removed from nodes=)", o.Foreign))
	}
	if o.Write {
		c.poke()
	}
}

// purgeStrays removes the keys of nodes not in nodes= the batch holds
// (the leader's), under ctx (the lease's safe deadline), and returns
// those NATS refused.
func (c *Cluster) purgeStrays(ctx context.Context, b *buckets, strays map[string]map[string]qualify.Status) map[string]map[string]qualify.Status {
	failed := map[string]map[string]qualify.Status{}
	for bucket, keys := range strays {
		if f := c.write(ctx, b.js, bucket, keys, func(k string) string { return k }, nil); len(f) > 0 {
			failed[bucket] = f
		}
	}
	return failed
}
