package cluster

import "context"

// The lease's holder keeps the lease bucket's stream led by another
// server than its own embedded one. A holder killed with its server
// (kill -9, a host lost) then leaves the stream led: the TTL removes the
// lease on time and the next leader creates it. Were the holder's server
// the stream's leader, the survivors would first elect a new one, which
// NATS does 4 to 9 s after the last heartbeat of the dead leader
// whatever the lease TTL, and the routers would go that long without a
// heartbeat.

// yieldLeaseStream waits for yield, poked at each renewal the lease
// took, and then has the lease's stream led elsewhere if this node's own
// server leads it, until ctx ends: the embedded server answers both
// without a request. With an external NATS it does nothing: no server
// dies with this node.
func (c *Cluster) yieldLeaseStream(ctx context.Context) {
	if c.srv == nil {
		return
	}
	account, stream := c.srv.GlobalAccount().GetName(), "KV_"+bucketLease
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.yield:
		}
		if c.srv.JetStreamIsStreamLeader(account, stream) && c.srv.JetStreamStepdownStream(account, stream) == nil {
			c.stepDowns.Add(1) // a refusal is left for the next renewal to try again
		}
	}
}

// pokeYield wakes yieldLeaseStream.
func (c *Cluster) pokeYield() {
	select {
	case c.yield <- struct{}{}:
	default:
	}
}
