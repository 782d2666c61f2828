package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Only the nodes of nodes= take part. On a shared NATS another
// cluster's node (or a node removed from nodes=, whose votes stay
// behind) writes to the same buckets: its membership, its votes and its
// lease are ignored, every node lists it (View.Foreign) and logs it once,
// and the leader removes its keys (strays), as the nodes that count
// could never tell it to.

// ours reports whether name is one of nodes=.
func (c *Cluster) ours(name string) bool { return c.cfg.index(name) >= 0 }

// stray records key of bucket, written by node, which is not one of
// nodes=: present (the leader removes it) or gone. The first time node is
// seen it is logged.
func (c *Cluster) stray(bucket, key, node string, gone bool) {
	c.mu.Lock()
	first := !c.foreign[node]
	c.foreign[node] = true
	if gone {
		delete(c.strays[bucket], key)
	} else {
		if c.strays[bucket] == nil {
			c.strays[bucket] = map[string]qualify.Status{}
		}
		c.strays[bucket][key] = qualify.Removed
	}
	c.mu.Unlock()
	if first {
		c.notice(slog.LevelWarn, fmt.Sprintf("cluster: node %s is not one of nodes=: its membership, votes and lease are ignored, and the leader removes its keys (another cluster on the same NATS, or a node removed from nodes=)", node))
	}
	if !gone {
		c.poke()
	}
}

// foreignLocked lists the foreign nodes seen, sorted; c.mu held.
func (c *Cluster) foreignLocked() []string {
	return slices.Sorted(maps.Keys(c.foreign))
}

// purgeStrays removes, while this node leads and within the lease's safe
// deadline, the keys of nodes not in nodes=; those NATS refused stay
// for the next pass.
func (c *Cluster) purgeStrays(ctx context.Context, b *buckets) bool {
	c.mu.Lock()
	until, leading := c.heldUntil, c.leadingAt(time.Now())
	out := map[string]map[string]qualify.Status{}
	for bucket, keys := range c.strays {
		if leading && len(keys) > 0 {
			out[bucket] = keys
			c.strays[bucket] = map[string]qualify.Status{}
		}
	}
	c.mu.Unlock()
	ok := true
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	for bucket, keys := range out {
		failed := c.write(ctx, b.js, bucket, keys, func(k string) string { return k }, "")
		c.mu.Lock()
		for k := range failed {
			if _, newer := c.strays[bucket][k]; !newer {
				c.strays[bucket][k] = qualify.Removed
			}
		}
		c.mu.Unlock()
		ok = ok && len(failed) == 0
	}
	return ok
}
