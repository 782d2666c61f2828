package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
// answers or ctx ends. An attempt that fails is logged with its cause
// (Hooks.Notice) each time the cause changes: JetStream not enabled, a
// server too old for the buckets' markers, a permission refused, or no
// JetStream leader elected yet.
func (c *Cluster) buckets(ctx context.Context) (*buckets, error) {
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(publishWindow),
		jetstream.WithPublishAsyncTimeout(c.member.ttl/3))
	if err != nil {
		return nil, fmt.Errorf("cluster: node %q: %w", c.cfg.Self, err)
	}
	cfgs := c.bucketConfigs()
	kvs := make([]jetstream.KeyValue, len(cfgs))
	for i, cfg := range cfgs {
		last := ""
		for kvs[i] == nil {
			kvs[i], err = c.bucket(ctx, js, cfg)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				last = c.bucketFailed(cfg.Bucket, err, last)
				if !sleepUntil(ctx, time.Now().Add(bucketRetry)) {
					return nil, ctx.Err()
				}
			}
		}
	}
	c.setStartError("")
	return &buckets{members: kvs[0], lease: kvs[1], votes: kvs[2], verdicts: kvs[3], js: js}, nil
}

// bucketFailed logs a failed attempt at bucket when its cause differs
// from the last one logged (last), records it for StartError, and
// returns the cause.
func (c *Cluster) bucketFailed(bucket string, err error, last string) string {
	cause := bucketCause(err)
	c.setStartError(fmt.Sprintf("bucket %s: %s", bucket, cause))
	if cause != last {
		c.notice(slog.LevelWarn, fmt.Sprintf("cluster: bucket %s: not created or opened, retrying every %v: %s", bucket, bucketRetry, cause))
	}
	return cause
}

// bucketCause says why a bucket could not be created or opened, in the
// operator's words where the error is one of the known causes.
func bucketCause(err error) string {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return "JetStream is not enabled on the NATS server or for this account: " + err.Error()
	case errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported):
		return "the NATS server is too old for the buckets' removal markers (nats-server 2.11 or later is needed): " + err.Error()
	case strings.Contains(strings.ToLower(err.Error()), "permission"):
		return "permission refused by NATS (the user may not use JetStream's API or the KV_qualifyd_* streams): " + err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, nats.ErrNoResponders):
		return "JetStream did not answer (no meta leader elected yet: fewer than a majority of the nodes reach each other): " + err.Error()
	}
	return err.Error()
}

// bucket creates or opens one bucket, bounded by the retry period's few
// multiples so that a JetStream without a leader does not hold it. A
// bucket that exists with other replicas than the file's is updated to
// them (nodes= grew or shrank); the lease and members buckets' TTLs are
// the leader's to set (lease.follow, followMembersTTL).
func (c *Cluster) bucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, 8*bucketRetry)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, cfg)
	if !errors.Is(err, jetstream.ErrBucketExists) {
		return kv, err
	}
	if kv, err = js.KeyValue(ctx, cfg.Bucket); err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return kv, nil
	}
	have, want := bs.Config(), cfg
	if cfg.Bucket == bucketLease || cfg.Bucket == bucketMembers {
		want.TTL, want.LimitMarkerTTL = have.TTL, have.LimitMarkerTTL
	}
	if sameSettings(have, want) {
		return kv, nil
	}
	if kv, err = js.UpdateKeyValue(ctx, want); err != nil {
		return nil, fmt.Errorf("update the settings from %s to the file's %s: %w", settings(have), settings(want), err)
	}
	c.notice(slog.LevelInfo, fmt.Sprintf("cluster: bucket %s: settings updated from %s to the file's %s", cfg.Bucket, settings(have), settings(want)))
	return kv, nil
}

// sameSettings reports whether a bucket with have needs no update to
// want: the same replicas, TTL and markers.
func sameSettings(have, want jetstream.KeyValueConfig) bool {
	return have.Replicas == want.Replicas && have.TTL == want.TTL && have.LimitMarkerTTL == want.LimitMarkerTTL
}

// settings is what the log says of a bucket's settings.
func settings(cfg jetstream.KeyValueConfig) string {
	return fmt.Sprintf("replicas %d, TTL %v", cfg.Replicas, cfg.TTL)
}

// bucketConfigs are the four buckets: members and lease expire keys
// nobody renews, and leave a marker so that watchers see the removal.
func (c *Cluster) bucketConfigs() []jetstream.KeyValueConfig {
	r := c.cfg.Replicas()
	return []jetstream.KeyValueConfig{
		ttlBucket(bucketMembers, r, c.cfg.MemberTTL),
		ttlBucket(bucketLease, r, c.cfg.LeaseTTL),
		{Bucket: bucketVotes, Replicas: r},
		{Bucket: bucketVerdicts, Replicas: r},
	}
}

// ttlBucket is the configuration of a bucket whose keys live ttl.
func ttlBucket(name string, replicas int, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: name, Replicas: replicas, TTL: ttl, LimitMarkerTTL: max(ttl, time.Second)}
}

// leaseBucket is the lease's view of its bucket's TTL (ttlStore).
type leaseBucket struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	replicas int
}

// TTL is the bucket's TTL as its stream's leader says.
func (b leaseBucket) TTL(ctx context.Context) (time.Duration, error) {
	st, err := b.kv.Status(ctx)
	if err != nil {
		return 0, err
	}
	return st.TTL(), nil
}

// SetTTL sets the bucket's TTL (and its markers' life) to ttl.
func (b leaseBucket) SetTTL(ctx context.Context, ttl time.Duration) error {
	_, err := b.js.UpdateKeyValue(ctx, ttlBucket(bucketLease, b.replicas, ttl))
	return err
}

// watch feeds every entry of kv to each, from the latest value of every
// key on, until ctx ends; a watch that closes (the connection went), or
// that has stopped delivering, is started again. passed is called at the
// end of each watch's first pass over the values the bucket held, with
// the keys that pass saw: a key removed while the watch was away may have
// left no marker by then. A watch has stopped delivering when it lags
// (follower.follow) or, for the members watch (members true), when this
// node's own renewal has not come back through it (membersStale), and
// then every watch is started again. A start is bounded (startWatch) and
// retried every bucketRetry; a streak of failures longer than MemberTTL
// is logged, and so is its end.
func (c *Cluster) watch(ctx context.Context, kv jetstream.KeyValue, each func(jetstream.KeyValueEntry), passed func(seen map[string]bool), members bool) {
	var out outage
	for ctx.Err() == nil {
		asked := time.Now()
		w, stop, err := startWatch(ctx, kv, c.member.ttl/3)
		if err != nil {
			if ctx.Err() == nil {
				c.watchFailed(&out, kv.Bucket(), asked, err)
			}
			sleepUntil(ctx, time.Now().Add(bucketRetry))
			continue
		}
		c.watchStarted(&out, kv.Bucket())
		epoch := c.rewatches.Load()
		stale := func() bool { return c.rewatches.Load() != epoch }
		if members {
			stale = func() bool { return c.membersStale() || c.rewatches.Load() != epoch }
		}
		f := follower{w: w, each: each, passed: passed, stale: stale, lagEvery: c.member.ttl / 3}
		if !members { // the members watch has membersStale, on this node's own renewals
			f.last = func(ctx context.Context) (uint64, bool) { return lastSeq(ctx, c.nc, kv.Bucket(), c.member.ttl/6) }
		}
		if f.follow(ctx) {
			c.lagged.Add(1)
		}
		_ = w.Stop()
		stop()
	}
}

// startWatch starts a watch of every key of kv that lives until ctx ends
// or stop is called, and gives up on it after within. nats.go's own
// bound on the watch's consumer creation is 5 s, and a creation asked of
// JetStream while it elects its meta leader (a server paused, killed or
// cut off) is never answered: the watch would start again up to 5 s
// after the election, the node's view of the bucket stale meanwhile.
// within is a renewal's bound (MemberTTL/3): a JetStream that cannot
// answer in that time has this node out of the cluster anyway.
func startWatch(ctx context.Context, kv jetstream.KeyValue, within time.Duration) (jetstream.KeyWatcher, context.CancelFunc, error) {
	wctx, stop := context.WithCancel(ctx)
	timer := time.AfterFunc(within, stop)
	w, err := kv.WatchAll(wctx)
	if !timer.Stop() { // it fired: wctx, and a watch on it, ended
		if err == nil {
			_ = w.Stop()
		}
		err = fmt.Errorf("no answer within %v: %w", within, context.DeadlineExceeded)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return w, stop, nil
}

// outage is a streak of failed attempts to start a bucket's watch.
type outage struct {
	since  time.Time // when the streak's first attempt was made; zero for none
	logged bool      // whether the streak was logged
}

// watchFailed records in out a start of bucket's watch, asked at asked,
// that failed, and logs the streak once it is older than MemberTTL: the
// node's view of the bucket (members, lease, votes or verdicts) stopped
// following it then.
func (c *Cluster) watchFailed(out *outage, bucket string, asked time.Time, err error) {
	now := time.Now()
	if out.since.IsZero() {
		out.since = asked
	}
	if out.logged || now.Sub(out.since) < c.member.ttl {
		return
	}
	out.logged = true
	c.notice(slog.LevelWarn, fmt.Sprintf("cluster: bucket %s: not watched for %v, retrying every %v: this node's view of it is stale meanwhile: %s",
		bucket, now.Sub(out.since).Round(time.Millisecond), bucketRetry, bucketCause(err)))
}

// watchStarted ends out's streak, saying so when it was logged.
func (c *Cluster) watchStarted(out *outage, bucket string) {
	if out.logged {
		c.notice(slog.LevelInfo, fmt.Sprintf("cluster: bucket %s: watched again after %v", bucket, time.Since(out.since).Round(time.Millisecond)))
	}
	*out = outage{}
}

// follower is one watch of a bucket being followed.
type follower struct {
	w      jetstream.KeyWatcher
	each   func(jetstream.KeyValueEntry)
	passed func(map[string]bool)
	stale  func() bool
	// last is the bucket's last sequence as its stream's leader says, ok
	// false when it does not answer; lagEvery is how often it is asked.
	// Without last the watch is never found lagging.
	last     func(context.Context) (uint64, bool)
	lagEvery time.Duration
}

// follow feeds the watch's entries until it closes, ctx ends, stale holds
// (checked every bucketRetry) or the watch lags; it returns true for a
// lag. The watch lags when, at one check, it has delivered nothing since
// the check before and not yet the last sequence the bucket's stream had
// then: an ordered consumer whose server died delivers nothing until
// nats.go has missed two of its 5 s heartbeats and made it again (longer
// while the stream elects a leader), and nothing else would tell. A watch
// still working through a backlog delivers something every period and is
// left alone; a check the stream does not answer (no leader, NATS away)
// says nothing.
func (f follower) follow(ctx context.Context) (lagged bool) {
	tick := time.NewTicker(bucketRetry)
	defer tick.Stop()
	check := time.NewTicker(f.lagEvery)
	defer check.Stop()
	seen := map[string]bool{}
	// the highest revision delivered, now and at the check before; the
	// stream's last sequence at the check before
	var delivered, before, target uint64
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			if f.stale() {
				return false
			}
		case <-check.C:
			if target > delivered && delivered == before {
				return true
			}
			before, target = delivered, 0
			if f.last == nil {
				continue
			}
			if last, ok := f.last(ctx); ok && last > delivered {
				target = last
			}
		case e, ok := <-f.w.Updates():
			switch {
			case !ok:
				return false
			case e == nil && seen != nil:
				f.passed(seen)
				seen = nil
			case e != nil:
				delivered = max(delivered, e.Revision())
				if seen != nil && !removed(e) {
					seen[e.Key()] = true
				}
				f.each(e)
			}
		}
	}
}

// lastSeq is the revision of the newest entry of bucket's stream (0
// for none), asked of the stream's leader over nc within wait (half a
// check's period: a loaded host answers late, not never); ok is false
// when no leader answers in time or it answers an error.
//
// Only the leader answers this request: a non-direct get of the last
// message by subject, which JetStream serves from the stream's leader
// alone (jsMsgGetRequest). nats.go's own calls serve neither purpose:
// its message gets are direct on a KV stream (any replica answers), and
// a stream's info, which the leader answers, is answered too, for its
// first ten seconds (NATS's lostQuorumInterval), by a restarted server
// that was the stream's preferred leader, from its replica as it was
// before the restart: in-process, that stale answer comes first, and a
// restarted node would take the records of its previous run for the
// bucket's last (TestLastSeqAfterARestart).
func lastSeq(ctx context.Context, nc *nats.Conn, bucket string, wait time.Duration) (uint64, bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + ".>"})
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return 0, false
	}
	return parseLastSeq(msg.Data)
}

// msgGetResponse is the part of JetStream's answer to a message get
// that lastSeq reads.
type msgGetResponse struct {
	Message *struct {
		Seq uint64 `json:"seq"`
	} `json:"message"`
	Error *struct {
		ErrCode int `json:"err_code"`
	} `json:"error"`
}

// jsNoMessageFound is JetStream's error code for a get that matched no
// message (JSNoMessageFoundErr): the bucket holds no entry.
const jsNoMessageFound = 10037

// parseLastSeq reads lastSeq's answer: the message's sequence, 0 for a
// stream with no message, ok false for another error or a body that is
// not an answer.
func parseLastSeq(data []byte) (uint64, bool) {
	var r msgGetResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, false
	}
	switch {
	case r.Error != nil:
		return 0, r.Error.ErrCode == jsNoMessageFound
	case r.Message == nil:
		return 0, false
	}
	return r.Message.Seq, true
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
