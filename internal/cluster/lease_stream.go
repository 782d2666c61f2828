package cluster

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"
)

// The lease's holder keeps the lease bucket's stream led by another
// server than its own embedded one. A holder killed with its server
// (kill -9, a host lost) then leaves the stream led: the TTL removes the
// lease on time and the next leader creates it. Were the holder's server
// the stream's leader, the survivors would first elect a new one, which
// NATS does 4 to 9 s after the last heartbeat of the dead leader
// whatever the lease TTL, and the routers would go that long without a
// heartbeat.

// stepDownSubject is the JetStream API of a stream leader's step-down.
const stepDownSubject = "$JS.API.STREAM.LEADER.STEPDOWN."

// yieldLeaseStream waits for yield, poked at each renewal the lease
// took, and then has the lease's stream led elsewhere if this node's own
// server leads it, until ctx ends. With an external NATS it does
// nothing: no server dies with this node.
func (c *Cluster) yieldLeaseStream(ctx context.Context) {
	js, err := jetstream.New(c.nc)
	if c.srv == nil || err != nil {
		return
	}
	stream := "KV_" + bucketLease
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.yield:
		}
		if c.leadsStream(ctx, js, stream) {
			c.stepDown(stream)
		}
	}
}

// leadsStream reports whether this node's server leads stream now.
func (c *Cluster) leadsStream(ctx context.Context, js jetstream.JetStream, stream string) bool {
	ctx, cancel := context.WithTimeout(ctx, c.lease.ttl/6)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	info := s.CachedInfo()
	return info.Cluster != nil && info.Cluster.Leader == c.srv.Name()
}

// stepDown asks stream's leader to hand the stream to another server;
// a refusal is left for the next renewal to try again.
func (c *Cluster) stepDown(stream string) {
	msg, err := c.nc.Request(stepDownSubject+stream, nil, c.lease.ttl/6)
	if err != nil {
		return
	}
	var resp struct {
		Success bool `json:"success"`
	}
	_ = json.Unmarshal(msg.Data, &resp)
	if resp.Success {
		c.stepDowns.Add(1)
	}
}

// pokeYield wakes yieldLeaseStream.
func (c *Cluster) pokeYield() {
	select {
	case c.yield <- struct{}{}:
	default:
	}
}
