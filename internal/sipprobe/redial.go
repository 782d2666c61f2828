package sipprobe

import (
	"context"
	"net"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// keepAlive is the TCP keepalive of every TCP and TLS connection: a probe
// after 15 s without traffic, then every 15 s, the connection closed after
// 9 unanswered (Go's defaults, stated so that the docs can rely on them).
// It keeps an ordinary conntrack or NAT entry open between probes; a
// middlebox that counts only SIP data forgets the flow anyway, which the
// midpoint redial and the retirement of silent connections cover
// (docs/qualify-semantics.md §3.2).
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 15 * time.Second, Count: 9}

// redial is a transaction to send again on a fresh connection: the
// registration gen it was due in, its deadline, and the context it is
// watched under. It holds a reference to tx (see Prober.unref).
type redial struct {
	tx       *transaction
	gen      uint32
	deadline instant
	ctx      context.Context
}

// hedge queues tx, at its midpoint, for a redial if its connection heard
// nothing since the probe's first send; a connection that did carries
// answers and is not replaced. ts.tb.mu is held.
func (ts *timers) hedge(tx *transaction, gen uint32) {
	if tx.conn().heardSince(tx.rec.sent) {
		return
	}
	ctx := context.Background()
	if tx.w != nil {
		ctx = tx.w.ctx
	}
	tx.refs.Add(1)
	ts.redials = append(ts.redials, redial{tx: tx, gen: gen, deadline: tx.fsm.deadline, ctx: ctx})
}

// redial sends the request of r.tx again on a fresh connection to its
// destination, dialed within the deadline (the TLS handshake included),
// unless another probe has replaced the connection already; the old one
// is retired. If the dial fails, the probe stays on the old connection
// until its deadline. The first final response on either counts.
func (p *Prober) redial(r redial) {
	defer p.unref(r.tx)
	old := r.tx.conn() // only this goroutine moves it
	ctx, cancel := context.WithDeadline(r.ctx, p.table.time(r.deadline))
	conn, _, err := p.streams.get(ctx, old.key, old)
	cancel()
	if err != nil {
		return
	}
	if !p.table.move(r.tx, r.gen, conn, p.headersOn(r.tx, conn)) {
		return
	}
	p.stats.redials.Add(1)
	if err := p.send(r.tx, r.deadline); err != nil {
		p.stats.transportErrors.Add(1)
		p.table.fail(r.tx, qualify.ReasonTransport, detailSendFailed)
	}
}

// headersOn returns the headers of tx's request sent on conn: its Via
// sent-by, and the From host where it defaulted to that.
func (p *Prober) headersOn(tx *transaction, conn *streamConn) *headers {
	h := *tx.rec.req.hdr
	if h.fromHost == h.sentBy {
		h.fromHost = conn.sentBy
	}
	h.sentBy = conn.sentBy
	return p.hdrs.get(&h)
}

// move puts tx, if still registered as gen, on conn with headers hdr,
// keeping its old connection as prev, and retires the old one, which
// its slot no longer holds, in any case.
func (tb *table) move(tx *transaction, gen uint32, conn *streamConn, hdr *headers) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	e := tx.ext
	retire(e.conn)
	if !tx.active || tx.gen != gen {
		return false
	}
	e.prev, e.conn = e.conn, conn
	conn.inflight++
	tx.rec.req.hdr = hdr
	return true
}

// retireSilent retires the connections of tx, which timed out, that
// heard nothing since its first send. tb.mu is held.
func (tb *table) retireSilent(tx *transaction) {
	e := tx.ext
	if e == nil || e.conn == nil {
		return
	}
	for _, c := range [2]*streamConn{e.conn, e.prev} {
		if c != nil && c.timedOut(tx.rec.sent) {
			retire(c)
		}
	}
}

// retire makes c take no new probe and closes it when its last
// transaction ends (now, if none is in flight). table.mu is held.
func retire(c *streamConn) {
	c.broken.Store(true)
	if c.inflight == 0 {
		c.drop()
	}
}

// release uncounts a transaction sent on c that ended, closing a retired
// c after its last one. table.mu is held.
func (c *streamConn) release() {
	c.inflight--
	if c.inflight == 0 && c.broken.Load() {
		c.drop()
	}
}
