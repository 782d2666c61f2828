package sipprobe

import (
	"context"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// ProbeAsync starts one probe of t, as Probe sends it, and returns at once;
// done receives tag and the result exactly once, from the prober's receive
// or timer goroutine, or before ProbeAsync returns when the probe cannot
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
func (p *Prober) ProbeAsync(ctx context.Context, t qualify.Target, tag uint64, done func(uint64, qualify.Result)) {
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
	tx := p.pool.Get().(*transaction)
	if err := p.prepare(ctx, tx, pr, rt, rt.dest); err != nil {
		p.release(tx)
		p.stats.transportErrors.Add(1)
		done(tag, qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error(), Transport: udp.String(), Dest: rt.dest})
		return
	}
	tx.tag = tag
	p.start(ctx, tx, pr.timeout, done)
}

// start registers the prepared UDP transaction tx as an asynchronous probe
// and sends it.
func (p *Prober) start(ctx context.Context, tx *transaction, timeout time.Duration, done func(uint64, qualify.Result)) {
	st := &tx.st
	tx.cb, tx.ctx = done, ctx
	tx.refs.Store(2) // this goroutine, until the send is over, and the completion
	// The request bytes are needed only for this send: a retransmission
	// rebuilds them from st.req, so a probe in flight (50,000 of them
	// when a million contacts are dead) holds no buffer (issue 7).
	bp := p.bufs.Get().(*[]byte)
	st.buf = (*bp)[:0]
	now := time.Now()
	st.sent, st.deadline = now, now.Add(timeout)
	if !p.register(tx, now) {
		res, tag := result(st, udp), tx.tag
		p.putBuf(bp, st)
		p.release(tx)
		done(tag, res)
		return
	}
	p.stats.probes.Add(1)
	if err := p.udp.send(st.buf, st.dest); err != nil {
		p.stats.transportErrors.Add(1)
		p.table.fail(tx, qualify.ReasonTransport, "send failed")
	}
	p.putBuf(bp, st)
	p.unref(tx)
}

// putBuf takes the request buffer back from st.
func (p *Prober) putBuf(bp *[]byte, st *txState) {
	*bp = st.buf[:0]
	st.buf = nil
	p.bufs.Put(bp)
}

// finishAsync delivers the result of a completed asynchronous transaction;
// the table calls it outside its lock.
func (p *Prober) finishAsync(tx *transaction) {
	res, tag, done := result(&tx.st, udp), tx.tag, tx.cb
	p.unref(tx)
	done(tag, res)
}

// unref drops one owner of an asynchronous transaction; the last returns
// it to the pool.
func (p *Prober) unref(tx *transaction) {
	if tx.refs.Add(-1) == 0 {
		p.release(tx)
	}
}

// watch is one cancellable context of asynchronous probes: how many of
// them are outstanding, and how to stop watching it.
type watch struct {
	n    int
	stop func() bool
}

// maxIdleWatches bounds the watched contexts that have no outstanding
// probe; beyond it, a context is unwatched when its last probe ends.
const maxIdleWatches = 16

// watch counts tx under its context, watching the context on first use.
// tb.mu must be held.
func (tb *table) watch(tx *transaction) {
	ctx := tx.ctx
	if ctx == nil || ctx.Done() == nil {
		tx.ctx = nil
		return
	}
	w := tb.watches[ctx]
	if w == nil {
		w = &watch{stop: context.AfterFunc(ctx, func() { tb.cancel(ctx) })}
		tb.watches[ctx] = w
	}
	w.n++
}

// unwatch uncounts the completed tx. tb.mu must be held.
func (tb *table) unwatch(tx *transaction) {
	w := tb.watches[tx.ctx]
	if w == nil {
		return
	}
	w.n--
	if w.n == 0 && len(tb.watches) > maxIdleWatches {
		w.stop()
		delete(tb.watches, tx.ctx)
	}
}

// cancel ends every outstanding asynchronous probe of ctx, which is done.
func (tb *table) cancel(ctx context.Context) {
	tb.mu.Lock()
	for _, tx := range tb.byKey {
		if tx.ctx == ctx {
			tx.st.reason, tx.st.detail = qualify.ReasonTimeout, "canceled"
			tb.complete(tx)
		}
	}
	delete(tb.watches, ctx)
	tb.mu.Unlock()
	tb.drain()
}
