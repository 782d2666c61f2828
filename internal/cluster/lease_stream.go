package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
//
// The stream goes to a replica named by this node (NATS's step-down with
// a preferred server), never to the first one NATS finds healthy: NATS
// counts a replica healthy for 3 s after it last answered, so a holder
// that took the lease right after its predecessor was cut off handed a
// stream to the cut server, and that stream had no leader until the
// election, seconds later (the partition test, under load).

// handOnActive is how recently a replica must have answered the stream's
// leader to be handed the stream: NATS's Raft heartbeats go every second,
// so a replica that missed one is passed over until the next renewal.
const handOnActive = 1500 * time.Millisecond

// yieldStreams waits for yield, poked at each renewal the lease took,
// and then has each bucket's stream led elsewhere if this node's own
// server leads it, until ctx ends. With an external NATS it does
// nothing: no server dies with this node.
func (c *Cluster) yieldStreams(ctx context.Context, js jetstream.JetStream) {
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
			if c.srv.JetStreamIsStreamLeader(account, stream) && c.handOn(ctx, js, stream) == nil {
				c.stepDowns.Add(1) // a refusal, or no replica to take it, is left for the next renewal
			}
		}
	}
}

// handOn has the stream, led by this node's server, step down to the
// replica handOnTarget picks, within a third of the lease's TTL.
func (c *Cluster) handOn(ctx context.Context, js jetstream.JetStream, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, c.lease.ttl/3)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		return fmt.Errorf("stream %s: no cluster information", stream)
	}
	to := handOnTarget(info.Cluster.Replicas)
	if to == "" {
		return fmt.Errorf("stream %s: no replica current and seen within %v", stream, handOnActive)
	}
	body, _ := json.Marshal(stepDownRequest{Placement: placement{Preferred: to}})
	msg, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
	if err != nil {
		return err
	}
	var resp stepDownResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("stream %s: step-down: %w", stream, err)
	}
	if !resp.Success {
		return fmt.Errorf("stream %s: step-down to %s refused: %s", stream, to, resp.Error.Description)
	}
	return nil
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

type placement struct {
	Preferred string `json:"preferred"`
}

// stepDownResponse is the JetStream API's answer to a step-down.
type stepDownResponse struct {
	Success bool `json:"success"`
	Error   struct {
		Description string `json:"description"`
	} `json:"error"`
}

// pokeYield wakes yieldStreams.
func (c *Cluster) pokeYield() {
	select {
	case c.yield <- struct{}{}:
	default:
	}
}
