package sipprobe

import (
	"context"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Start starts one probe of t, as Probe sends it, and returns at once;
// done receives tag and the result exactly once, from the prober's receive
// or timer goroutine, or before Start returns when the probe cannot
// be sent. done must not block. The caller tells its probes apart by tag,
// so that one done serves them all and no closure lives per probe.
//
// No goroutine waits for an asynchronous probe: a UDP probe to an IP
// address is one pending-table entry and one timer-heap item until it ends
// (issue 7: a million contacts with every peer dead keep 50,000 probes in
// flight). Probes that need DNS, a TCP or TLS connection, or a digest
// answer run as Probe does, in a goroutine of their own.
//
// Cancelling ctx ends the probe promptly with reason timeout and detail
// "canceled". The table watches each distinct cancellable context once,
// so ctx should be long-lived and shared by many probes; it must be
// comparable, as the standard library's contexts are.
func (p *Prober) Start(ctx context.Context, t qualify.Target, tag uint64, done func(uint64, qualify.Result)) {
	var fast route
	rt := &fast
	if !fastRoute(t.URI, t.Options, rt) {
		var err error
		if rt, err = p.routes.get(t.URI, t.Options); err != nil {
			p.stats.transportErrors.Add(1)
			done(tag, qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error()})
			return
		}
	}
	pr := probe{opts: t.Options, timeout: t.Timeout}
	if pr.timeout <= 0 {
		pr.timeout = qualify.SIPTransactionTimeout
	}
	if _, auth := pr.credentials(); auth || !rt.addr.IsValid() || rt.transport != udp {
		go func() { done(tag, p.Probe(ctx, t)) }()
		return
	}
	tx := p.acquire(false)
	if tx == nil {
		p.stats.transportErrors.Add(1)
		done(tag, qualify.Result{Reason: qualify.ReasonTransport, Detail: errTooMany.Error(), Transport: udp.String(), Dest: rt.dest})
		return
	}
	if err := p.prepare(ctx, tx, pr, rt, rt.dest); err != nil {
		p.release(tx)
		p.stats.transportErrors.Add(1)
		done(tag, qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error(), Transport: udp.String(), Dest: rt.dest})
		return
	}
	p.start(ctx, tx, pr.timeout, tag, done)
}

// start registers the prepared UDP transaction tx as an asynchronous probe
// and sends it.
func (p *Prober) start(ctx context.Context, tx *transaction, timeout time.Duration, tag uint64, done func(uint64, qualify.Result)) {
	st := &tx.st
	tx.cb, tx.tag = done, tag
	tx.refs.Store(2) // this goroutine, until the send is over, and the completion
	now := p.table.now()
	st.sent, st.deadline = now, now.add(timeout)
	if !p.register(tx, now, ctx) {
		res := p.table.result(tx, udp)
		p.release(tx)
		done(tag, res)
		return
	}
	p.stats.probes.Add(1)
	// The request bytes are needed only for this send: a retransmission
	// builds them again, so a probe in flight (50,000 of them when a
	// million contacts are dead) holds no buffer (issue 7).
	bp := p.bufs.Get().(*[]byte)
	b := tx.appendRequest((*bp)[:0])
	if err := p.udp.send(b, st.dest); err != nil {
		p.stats.transportErrors.Add(1)
		p.table.fail(tx, qualify.ReasonTransport, detailSendFailed)
	}
	*bp = b[:0]
	p.bufs.Put(bp)
	p.unref(tx)
}

// finishAsync delivers the result of a completed asynchronous transaction;
// the table calls it outside its lock.
func (p *Prober) finishAsync(tx *transaction) {
	res, tag, done := p.table.result(tx, udp), tx.tag, tx.cb
	p.unref(tx)
	done(tag, res)
}

// unref drops one owner of an asynchronous transaction; the last
// releases it.
func (p *Prober) unref(tx *transaction) {
	if tx.refs.Add(-1) == 0 {
		p.release(tx)
	}
}

// watch is one cancellable context of asynchronous probes: how many of
// them are outstanding, and how to stop watching it.
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

// cancel ends every outstanding asynchronous probe of ctx, which is done.
func (tb *table) cancel(ctx context.Context) {
	tb.mu.Lock()
	tb.each(func(tx *transaction) {
		if tx.w != nil && tx.w.ctx == ctx {
			tx.st.reason, tx.st.detail = qualify.ReasonTimeout, detailCanceled
			tb.complete(tx)
		}
	})
	delete(tb.watches, ctx)
	tb.mu.Unlock()
	tb.drain()
}
