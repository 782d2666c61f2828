package cluster

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// revEntry is a put of revision r.
func revEntry(r uint64) entry {
	return entry{key: "k", value: "Reachable", op: jetstream.KeyValuePut, rev: r}
}

// fakeWatch is a KeyWatcher fed by the test.
type fakeWatch chan jetstream.KeyValueEntry

func (w fakeWatch) Updates() <-chan jetstream.KeyValueEntry { return w }
func (w fakeWatch) Stop() error                             { return nil }

// followFor runs a follower over w against a stream whose last sequence
// last gives, checked every second, and returns whether it lagged and
// when it returned (at most the given span).
func followFor(span time.Duration, w fakeWatch, last func() (uint64, bool)) (bool, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	start := time.Now()
	f := follower{w: w, each: func(jetstream.KeyValueEntry) {}, passed: func(map[string]bool) {},
		stale: func() bool { return false }, last: func(context.Context) (uint64, bool) { return last() }, lagEvery: time.Second}
	lagged := f.follow(ctx)
	return lagged, time.Since(start)
}

// TestFollowLagsWhenTheWatchStops: a watch that delivered up to
// revision 5 of a stream at 7 and then nothing is started again at the
// second check; one caught up, one behind but delivering every period,
// and one whose stream does not answer are left alone.
func TestFollowLagsWhenTheWatchStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := make(fakeWatch, 5)
		for r := range uint64(5) {
			w <- revEntry(r + 1)
		}
		lagged, after := followFor(time.Minute, w, func() (uint64, bool) { return 7, true })
		if !lagged || after != 2*time.Second {
			t.Errorf("stopped watch: lagged %v after %v, want true after 2s", lagged, after)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := make(fakeWatch, 1)
		w <- revEntry(7)
		if lagged, _ := followFor(time.Minute, w, func() (uint64, bool) { return 7, true }); lagged {
			t.Error("a watch that delivered the stream's last sequence lagged")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := make(fakeWatch)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // a backlog: one entry a period, far behind the stream
			for r := uint64(1); ; r++ {
				time.Sleep(900 * time.Millisecond)
				select {
				case w <- revEntry(r):
				case <-done:
					return
				}
			}
		})
		lagged, _ := followFor(time.Minute, w, func() (uint64, bool) { return 1000, true })
		close(done)
		wg.Wait()
		if lagged {
			t.Error("a watch working through a backlog lagged")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := make(fakeWatch, 1)
		w <- revEntry(1)
		if lagged, _ := followFor(time.Minute, w, func() (uint64, bool) { return 0, false }); lagged {
			t.Error("a watch whose stream does not answer lagged")
		}
	})
}

// natsCreateWait is nats.go's own bound on a consumer's creation.
const natsCreateWait = 5 * time.Second

// electingKV is a bucket whose JetStream elects its meta leader until
// answerFrom: a watch's consumer creation asked before then is never
// answered, and waits as nats.go waits (its context, at most 5 s); one
// asked later starts w at once. Its stream's status is only an error,
// so the lag check says nothing.
type electingKV struct {
	jetstream.KeyValue
	answerFrom time.Time
	w          fakeWatch
}

func (kv *electingKV) Bucket() string { return bucketVotes }

func (kv *electingKV) WatchAll(ctx context.Context, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	if !time.Now().Before(kv.answerFrom) {
		return kv.w, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(natsCreateWait):
		return nil, context.DeadlineExceeded
	}
}

func (kv *electingKV) Status(context.Context) (jetstream.KeyValueStatus, error) {
	return nil, context.DeadlineExceeded
}

// TestWatchStartsSoonAfterAnElection: JetStream answers no consumer
// creation for 7 s (its meta leader paused, then elected again); the
// watch starts within a renewal's bound (MemberTTL/3) and a retry of the
// election's end, not up to nats.go's 5 s later, and the outage is
// logged once it is older than MemberTTL, and its end.
func TestWatchStartsSoonAfterAnElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const election = 7 * time.Second
		log := &notices{}
		c := &Cluster{member: term{testTTL}, hooks: Hooks{Notice: log.notice}}
		start := time.Now()
		kv := &electingKV{answerFrom: start.Add(election), w: make(fakeWatch, 1)}
		kv.w <- revEntry(1)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan time.Duration, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.watch(ctx, kv, func(jetstream.KeyValueEntry) { got <- time.Since(start) }, func(map[string]bool) {}, false)
		}()
		after := <-got
		cancel()
		<-done
		if bound := election + testTTL/3 + bucketRetry; after > bound {
			t.Errorf("the watch delivered %v after the election began, %v after its end, want within %v", after, after-election, bound-election)
		}
		want := []string{
			"cluster: bucket qualifyd_votes: not watched for 3.5s, retrying every 250ms: this node's view of it is stale meanwhile: " +
				"JetStream did not answer (no meta leader elected yet: fewer than a majority of the nodes reach each other): no answer within 1s: context deadline exceeded",
			"cluster: bucket qualifyd_votes: watched again after 7.5s",
		}
		if !slices.Equal(log.lines, want) {
			t.Errorf("logged\n%s\nwant\n%s", strings.Join(log.lines, "\n"), strings.Join(want, "\n"))
		}
		t.Logf("the watch delivered %v after the election ended", after-election)
	})
}

// TestParseLastSeq: the stream leader's answer to lastSeq's get is the
// newest entry's revision, a stream with no entry is revision 0, and any
// other error or a body that is not an answer says nothing.
func TestParseLastSeq(t *testing.T) {
	for _, c := range []struct {
		body string
		want uint64
		ok   bool
	}{
		{`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$KV.b.k","seq":42,"data":"","time":"2026-12-07T12:00:00Z"}}`, 42, true},
		{`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}}`, 0, true},
		{`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":503,"err_code":10008,"description":"JetStream cluster not available"}}`, 0, false},
		{`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}`, 0, false},
		{`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response"}`, 0, false},
		{`not json`, 0, false},
		{``, 0, false},
	} {
		if got, ok := parseLastSeq([]byte(c.body)); got != c.want || ok != c.ok {
			t.Errorf("parseLastSeq(%q) = %d, %v; want %d, %v", c.body, got, ok, c.want, c.ok)
		}
	}
}
