package sipprobe

import (
	"context"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// watch is one cancellable context of probes: how many of their
// transactions are outstanding, and how to stop watching it.
type watch struct {
	ctx  context.Context
	n    int
	stop func() bool
}

// maxIdleWatches bounds the watched contexts that have no outstanding
// probe; beyond it, a context is unwatched when its last probe ends.
const maxIdleWatches = 16

// watch counts tx under ctx, watching ctx on first use; a context that
// cannot be cancelled is not watched. tb.mu must be held.
func (tb *table) watch(tx *transaction, ctx context.Context) {
	if ctx == nil || ctx.Done() == nil {
		return
	}
	w := tb.watches[ctx]
	if w == nil {
		w = &watch{ctx: ctx, stop: context.AfterFunc(ctx, func() { tb.cancel(ctx) })}
		tb.watches[ctx] = w
	}
	w.n++
	tx.w = w
}

// unwatch uncounts the completed tx. tb.mu must be held.
func (tb *table) unwatch(tx *transaction) {
	w := tx.w
	if w == nil {
		return
	}
	w.n--
	if w.n == 0 && len(tb.watches) > maxIdleWatches && tb.watches[w.ctx] == w {
		w.stop()
		delete(tb.watches, w.ctx)
	}
}

// cancel ends every outstanding transaction of ctx, which is done, with
// reason timeout and detail "canceled".
func (tb *table) cancel(ctx context.Context) {
	tb.mu.Lock()
	tb.each(func(tx *transaction) {
		if tx.w != nil && tx.w.ctx == ctx {
			tx.fsm.end(qualify.ReasonTimeout, detailCanceled)
			tb.complete(tx)
		}
	})
	delete(tb.watches, ctx)
	tb.mu.Unlock()
	tb.drain()
}
