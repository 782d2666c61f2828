package sink

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"sync"
)

// A release's burst: every object pushed once, as fast as the router
// answers, through a driver that can have several pushes in flight.

// batcher is a driver that can have several pushes in flight at once:
// pushBatch pushes objs and sets errs[i] to what push would have
// returned for objs[i]. An error that is not a *Rejected ends the
// session, as push's does; the objects after it may be left unpushed
// with that error.
type batcher interface {
	pushBatch(ctx context.Context, objs []Object, errs []error)
}

// inFlight bounds the pushes a batcher has in flight at once: a release
// of 10,000 objects is bound by the router's answers, not by one round
// trip after another, without opening more connections than a router's
// few workers take.
const inFlight = 16

// defaultClient is the HTTP drivers' client when none is set: the
// default transport, keeping inFlight idle connections per router, so
// that a batch's requests reuse theirs instead of dialling anew.
var defaultClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = inFlight
	return &http.Client{Transport: t}
})

// idempotent marks req as safe to send again, so that net/http retries it
// on a fresh connection when the router closed the kept-alive one it was
// written to (a restart, an idle timeout): every body the HTTP drivers send
// sets or reads a level, which holds however often it arrives. The header
// is not sent (net/http's Transport: an empty Idempotency-Key).
func idempotent(req *http.Request) { req.Header["Idempotency-Key"] = nil }

// pushBurst pushes the queue as pushAll does (without heartbeats), a
// batch at a time through a batcher; a driver that is none pushes one at
// a time.
func (r *Reconciler) pushBurst(ctx context.Context, step *int) error {
	b, ok := r.drv.(batcher)
	if !ok {
		return r.pushAll(ctx, nil, step)
	}
	var batch []Object
	errs := make([]error, maxBatch)
	for {
		if batch = r.take(batch[:0]); len(batch) == 0 {
			return nil
		}
		if err := r.gated(); err != nil {
			r.putBack(batch)
			return err
		}
		clear(errs)
		b.pushBatch(ctx, batch, errs[:len(batch)])
		if err := r.batchPushed(batch, errs, step); err != nil {
			return err
		}
	}
}

// batchPushed records a batch's results, as pushAll does one push's; the
// objects whose push failed with a session's error are queued again and
// the first such error is returned.
func (r *Reconciler) batchPushed(batch []Object, errs []error, step *int) error {
	var failed []Object
	var end error
	for i, o := range batch {
		var rej *Rejected
		if err := errs[i]; err != nil && !errors.As(err, &rej) {
			failed, end = append(failed, o), cmp.Or(end, err)
			continue
		}
		r.pushed(o, rej, step)
	}
	r.putBack(failed)
	return end
}

// concurrently runs push for each of objs, at most inFlight at once, and
// sets errs[i] to objs[i]'s error: the batch of a driver whose pushes are
// independent requests (HTTP).
func concurrently(ctx context.Context, objs []Object, errs []error, push func(context.Context, Object) error) {
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = push(ctx, o)
		})
	}
	wg.Wait()
}
