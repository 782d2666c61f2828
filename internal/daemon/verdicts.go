package daemon

import (
	"context"
	"sync"
)

// aorQueue is the AoRs whose cluster verdicts changed and that the sinks
// have not recomputed yet: the Verdict hook adds to it without waiting
// on the sinks' lock (a reload at a million contacts holds it for
// seconds), and feedVerdicts drains it. An AoR queued again before it is
// taken is one entry: the sinks read the cluster's status when they
// recompute, so the latest verdict is the one pushed.
type aorQueue struct {
	mu    sync.Mutex
	names map[string]struct{}
	wake  chan struct{} // capacity 1: names is not empty
}

// newAORQueue returns an empty queue.
func newAORQueue() *aorQueue {
	return &aorQueue{names: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// add queues the AoR name: O(1), never blocking but on the queue's own
// lock, which nothing holds while it waits.
func (q *aorQueue) add(name string) {
	q.mu.Lock()
	q.names[name] = struct{}{}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the queued names and empties the queue.
func (q *aorQueue) take() map[string]struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	names := q.names
	q.names = make(map[string]struct{}, len(names))
	return names
}

// feedVerdicts has the sinks recompute every AoR the Verdict hook
// queued, until ctx is done.
func (n *node) feedVerdicts(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.changed.wake:
		}
		n.feedQueued()
	}
}

// feedQueued has the sinks recompute the AoRs queued now.
func (n *node) feedQueued() {
	for name := range n.changed.take() {
		n.d.sinks.AoRChanged(name)
	}
}
