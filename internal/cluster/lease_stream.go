package cluster

import "context"

// The lease's holder keeps every bucket's stream led by another server
// than its own embedded one. A holder killed or cut off with its server
// (kill -9, a host lost, its routes cut) then leaves every stream led:
// the TTL removes the lease on time, the next leader creates it, and the
// survivors go on renewing their membership and counting votes. Were the
// holder's server a stream's leader, the survivors would first elect a
// new one, which NATS does 4 to 9 s after the last heartbeat of the dead
// leader whatever the TTLs: for the lease's stream the routers would go
// that long without a heartbeat, for the members' stream the survivors
// would drop out of the cluster meanwhile.

// yieldStreams waits for yield, poked at each renewal the lease took,
// and then has each bucket's stream led elsewhere if this node's own
// server leads it, until ctx ends: the embedded server answers both
// without a request. With an external NATS it does nothing: no server
// dies with this node.
func (c *Cluster) yieldStreams(ctx context.Context) {
	if c.srv == nil {
		return
	}
	account := c.srv.GlobalAccount().GetName()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.yield:
		}
		for _, b := range []string{bucketLease, bucketMembers, bucketVotes, bucketVerdicts} {
			stream := "KV_" + b
			if c.srv.JetStreamIsStreamLeader(account, stream) && c.srv.JetStreamStepdownStream(account, stream) == nil {
				c.stepDowns.Add(1) // a refusal is left for the next renewal to try again
			}
		}
	}
}

// pokeYield wakes yieldStreams.
func (c *Cluster) pokeYield() {
	select {
	case c.yield <- struct{}{}:
	default:
	}
}
