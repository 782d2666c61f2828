package cluster

import (
	"context"
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
