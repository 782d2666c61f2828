package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// buckets are the cluster's key-value buckets (doc.go), and the
// JetStream context the publisher writes the votes and verdicts through.
type buckets struct {
	members, lease, votes, verdicts jetstream.KeyValue
	js                              jetstream.JetStream
}

// publishWindow bounds the votes and verdicts in flight, sent and not yet
// acknowledged (write).
const publishWindow = 4096

// bucketRetry is the pause between attempts to create the buckets while
// JetStream is not ready (no meta leader elected yet).
const bucketRetry = 250 * time.Millisecond

// buckets creates (or opens) the buckets, retrying until JetStream
// answers or ctx ends.
func (c *Cluster) buckets(ctx context.Context) (*buckets, error) {
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(publishWindow),
		jetstream.WithPublishAsyncTimeout(c.member.ttl/3))
	if err != nil {
		return nil, fmt.Errorf("cluster: node %q: %w", c.cfg.Self, err)
	}
	cfgs := c.bucketConfigs()
	kvs := make([]jetstream.KeyValue, len(cfgs))
	for i, cfg := range cfgs {
		for kvs[i] == nil {
			kvs[i], err = c.bucket(ctx, js, cfg)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil && !sleepUntil(ctx, time.Now().Add(bucketRetry)) {
				return nil, ctx.Err()
			}
		}
	}
	return &buckets{members: kvs[0], lease: kvs[1], votes: kvs[2], verdicts: kvs[3], js: js}, nil
}

// bucket creates or opens one bucket, bounded by the retry period's few
// multiples so that a JetStream without a leader does not hold it.
func (c *Cluster) bucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, 8*bucketRetry)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, cfg.Bucket)
	}
	return kv, err
}

// bucketConfigs are the four buckets: members and lease expire keys
// nobody renews, and leave a marker so that watchers see the removal.
func (c *Cluster) bucketConfigs() []jetstream.KeyValueConfig {
	r := c.cfg.Replicas()
	ttl := func(name string, d time.Duration) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Replicas: r, TTL: d, LimitMarkerTTL: max(d, time.Second)}
	}
	return []jetstream.KeyValueConfig{
		ttl(bucketMembers, c.cfg.MemberTTL),
		ttl(bucketLease, c.cfg.LeaseTTL),
		{Bucket: bucketVotes, Replicas: r},
		{Bucket: bucketVerdicts, Replicas: r},
	}
}

// watch feeds every entry of kv to each, from the latest value of every
// key on, until ctx ends; a watch that closes (the connection went), or
// that has stopped delivering, is started again. passed is called at the
// end of each watch's first pass over the values the bucket held, with
// the keys that pass saw: a key removed while the watch was away may have
// left no marker by then. The members watch (members true) finds out
// that watches have stopped delivering (membersStale) and has every
// watch started again.
func (c *Cluster) watch(ctx context.Context, kv jetstream.KeyValue, each func(jetstream.KeyValueEntry), passed func(seen map[string]bool), members bool) {
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err != nil {
			sleepUntil(ctx, time.Now().Add(bucketRetry))
			continue
		}
		epoch := c.rewatches.Load()
		stale := func() bool { return c.rewatches.Load() != epoch }
		if members {
			stale = func() bool { return c.membersStale() || c.rewatches.Load() != epoch }
		}
		follow(ctx, w, each, passed, stale)
		_ = w.Stop()
	}
}

// follow feeds one watch's entries until it closes, ctx ends or stale
// holds (checked every bucketRetry).
func follow(ctx context.Context, w jetstream.KeyWatcher, each func(jetstream.KeyValueEntry), passed func(map[string]bool), stale func() bool) {
	tick := time.NewTicker(bucketRetry)
	defer tick.Stop()
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if stale() {
				return
			}
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return
			case e == nil && seen != nil:
				passed(seen)
				seen = nil
			case e != nil:
				if seen != nil && !removed(e) {
					seen[e.Key()] = true
				}
				each(e)
			}
		}
	}
}

// once returns a passed function for watch that closes ch after the first
// pass and does nothing else.
func once(ch chan struct{}) func(map[string]bool) {
	var o sync.Once
	return func(map[string]bool) { o.Do(func() { close(ch) }) }
}

// removed reports whether an entry is a key's removal: a delete, a purge,
// or the marker the TTL leaves.
func removed(e jetstream.KeyValueEntry) bool {
	op := e.Operation()
	return op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge
}
