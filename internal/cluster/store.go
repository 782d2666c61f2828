package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A node that cannot store is out of the cluster. The embedded server
// disables its JetStream when a write to its store fails for want of
// space ("JetStream out of resources, will be DISABLED") and never
// enables it again by itself: the node would stay a member, a vantage
// and maybe the leader, while its server holds no replica, so that the
// next node to fail takes the buckets' quorum with it. So while its
// server's JetStream is disabled the node gives the lease up, renews no
// membership (its key lapses: the others stop counting it as a vantage,
// and its votes with it), says it is out of the cluster (View.Store,
// Vouch) and logs it; once the store has room again (storeHeadroom) it
// starts its embedded server again, whose JetStream rejoins, and so does
// the node.

// storeHeadroom is the free space the store's filesystem must have
// before the node enables its JetStream again: room for a few of a
// bucket stream's blocks, so that the first writes do not fill it again.
const storeHeadroom = 8 << 20

// guardStore checks the embedded server's JetStream every renewal
// period (a third of member_ttl) until ctx ends; nothing with an
// external NATS, whose store is its operator's.
func (c *Cluster) guardStore(ctx context.Context) {
	if c.restart == nil {
		return
	}
	for sleepUntil(ctx, time.Now().Add(c.member.ttl/3)) {
		c.checkStore()
	}
}

// checkStore records whether the embedded server's JetStream is enabled,
// logging each edge, and enables it again when the store has room.
func (c *Cluster) checkStore() {
	srv := c.server()
	if srv == nil || !srv.Running() { // closing, or shut down: no store to speak of
		return
	}
	if srv.JetStreamEnabled() {
		c.setStoreError("")
		return
	}
	c.mu.Lock()
	space := c.free
	c.mu.Unlock()
	free, err := space(c.cfg.Store)
	switch {
	case err != nil:
		c.setStoreError(fmt.Sprintf("JetStream disabled by the embedded NATS server; the store %s cannot be checked: %v", c.cfg.Store, err))
	case free < storeHeadroom:
		c.setStoreError(fmt.Sprintf("JetStream disabled by the embedded NATS server: the store %s has %d KiB free, it needs %d KiB", c.cfg.Store, free>>10, storeHeadroom>>10))
	default:
		c.setStoreError("JetStream disabled by the embedded NATS server")
		if err := c.restartServer(srv); err != nil {
			c.setStoreError(fmt.Sprintf("JetStream disabled by the embedded NATS server, which could not be started again: %v", err))
		}
	}
}

// restartServer starts the embedded server again in place of old, whose
// JetStream is disabled: NATS enables a server's JetStream again, and
// rejoins its meta group, only at its start. The node's client
// reconnects to the new server (inProcess); the next check sees its
// JetStream enabled.
func (c *Cluster) restartServer(old *server.Server) error {
	old.Shutdown()
	old.WaitForShutdown()
	s, err := c.restart()
	if err != nil {
		return err
	}
	if !c.srv.CompareAndSwap(old, s) { // Close ran meanwhile
		s.Shutdown()
	}
	return nil
}

// setStoreError records why this node cannot store ("" when it can) and
// logs each change between the two; taking the store away ends the
// node's leading at once (leadingAt), and the lease gives its key up at
// its next renewal (storeFit).
func (c *Cluster) setStoreError(why string) {
	c.mu.Lock()
	was := c.storeErr
	c.storeErr = why
	c.mu.Unlock()
	switch {
	case was == "" && why != "":
		c.notice(slog.LevelError, "cluster: this node cannot store ("+why+"): it gives up the lease, leaves the cluster and its votes stop counting until it can store again")
		c.poke()
	case was != "" && why == "":
		c.notice(slog.LevelInfo, "cluster: this node can store again: its JetStream is enabled, it rejoins the cluster")
	}
}

// storeFit reports whether this node can store: the lease's check
// before it campaigns or renews, and the membership's before a renewal.
func (c *Cluster) storeFit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeErr == ""
}

// freeSpace is the space free for an unprivileged writer on the
// filesystem of dir, in bytes.
func freeSpace(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
