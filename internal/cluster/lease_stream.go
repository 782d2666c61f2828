package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The lease's holder keeps every bucket's stream led by another server
// than its own embedded one. A holder killed or cut off with its server
// (kill -9, a host lost, its routes cut) then leaves every stream led:
// the TTL removes the lease on time, the next leader creates it, and the
// survivors go on renewing their membership and counting votes. Were the
// holder's server a stream's leader, the survivors would first elect a
// new one, which NATS does seconds after the last heartbeat of the dead
// leader whatever the TTLs (docs/cluster.md): for the lease's stream the
// routers would go that long without a heartbeat, for the members'
// stream the survivors would drop out of the cluster meanwhile.
//
// The stream goes to a replica named by this node (NATS's step-down with
// a preferred server), never to the first one NATS finds healthy: NATS
// still counts a replica healthy for a while after it last answered, so
// a server cut off moments ago could be handed a stream it cannot lead,
// leaving that stream without a leader until the next election.

// handOnActive is how recently a replica must have answered the stream's
// leader to be handed the stream: NATS's Raft heartbeats go every second,
// so a replica that missed one is passed over until the next renewal.
const handOnActive = 1500 * time.Millisecond

// yieldStreams waits for yield, poked at each renewal the lease took,
// and then has each bucket's stream led elsewhere if this node's own
// server leads it (none with an external NATS: no server dies with this
// node), then sets the members bucket's TTL to the file's
// (followMembersTTL), until ctx ends.
func (c *Cluster) yieldStreams(ctx context.Context, bs *buckets) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.yield:
		}
		c.handOnStreams(ctx, bs.js)
		c.followMembersTTL(ctx, bs)
	}
}

// handOnStreams has each bucket's stream that this node's embedded server
// leads led elsewhere; nothing with an external NATS.
func (c *Cluster) handOnStreams(ctx context.Context, js jetstream.JetStream) {
	srv := c.server()
	if srv == nil {
		return
	}
	account := srv.GlobalAccount().GetName()
	for _, b := range []string{bucketLease, bucketMembers, bucketVotes, bucketVerdicts} {
		stream := "KV_" + b
		if srv.JetStreamIsStreamLeader(account, stream) && c.handOn(ctx, js, stream) {
			c.stepDowns.Add(1)
		}
	}
}

// handOn has the stream, led by this node's server, step down to the
// replica handOnTarget picks, within a third of the lease's TTL. It
// reports whether the stream's leader agreed; with no replica to take it,
// or no answer, the stream stays led here until a later renewal.
func (c *Cluster) handOn(ctx context.Context, js jetstream.JetStream, stream string) bool {
	ctx, cancel := context.WithTimeout(ctx, c.lease.ttl/3)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return false
	}
	to := handOnTarget(s.CachedInfo().Cluster.Replicas)
	if to == "" {
		return false
	}
	body, _ := json.Marshal(stepDownRequest{Placement: placement{Preferred: to}})
	msg, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
	if err != nil {
		return false
	}
	var resp struct {
		Success bool `json:"success"`
	}
	return json.Unmarshal(msg.Data, &resp) == nil && resp.Success
}

// handOnTarget is the replica a stream is handed to: the first that is
// current, not offline and answered the leader within handOnActive; ""
// for none.
func handOnTarget(replicas []*jetstream.PeerInfo) string {
	for _, r := range replicas {
		if r != nil && r.Name != "" && r.Current && !r.Offline && r.Active <= handOnActive {
			return r.Name
		}
	}
	return ""
}

// stepDownRequest is the JetStream API's leader step-down request, with
// the server that should lead next.
type stepDownRequest struct {
	Placement placement `json:"placement"`
}

// placement names the server a step-down hands the stream to.
type placement struct {
	Preferred string `json:"preferred"`
}

// pokeYield wakes yieldStreams.
func (c *Cluster) pokeYield() {
	select {
	case c.yield <- struct{}{}:
	default:
	}
}
