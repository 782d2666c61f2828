package sipprobe

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Probe sends one OPTIONS transaction to t and returns what it measured.
//
// The deadline is t.Timeout (qualify.SIPTransactionTimeout when <= 0) from
// the first send; over TCP/TLS it starts before the connection is set up,
// so a probe never lasts longer than that after DNS. DNS resolution has
// its own timeout (Config.DNSTimeout) and is reported in Result.DNS. When
// ctx is cancelled, Probe returns at once with reason timeout and detail
// "canceled". A host name resolving to several targets probes them all
// concurrently (see qualify.Result.Targets).
func (p *Prober) Probe(ctx context.Context, t qualify.Target) qualify.Result {
	rt, err := p.routes.get(t.URI, t.Options)
	if err != nil {
		p.stats.transportErrors.Add(1)
		return qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error()}
	}
	pr := probe{opts: t.Options, timeout: t.Timeout}
	if pr.timeout <= 0 {
		pr.timeout = qualify.SIPTransactionTimeout
	}
	if rt.addr.IsValid() {
		return p.probeAddr(ctx, pr, rt, rt.dest)
	}
	return p.probeHost(ctx, pr, rt)
}

// probe is what a probe needs of its Target. It is passed by value, so
// the Target itself never escapes to the heap.
type probe struct {
	opts    *qualify.ProbeOptions
	timeout time.Duration
}

// credentials returns the target's digest credentials, if any.
func (pr probe) credentials() (qualify.Credentials, bool) {
	if pr.opts == nil || pr.opts.Auth.Username == "" {
		return qualify.Credentials{}, false
	}
	return pr.opts.Auth, true
}

// probeHost resolves rt.host (RFC 3263) and probes every target.
func (p *Prober) probeHost(ctx context.Context, pr probe, rt *route) qualify.Result {
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, p.cfg.DNSTimeout)
	addrs, err := p.dns.resolve(dctx, rt.host, rt.port, rt.transport)
	cancel()
	took := time.Since(start)
	if err != nil {
		return qualify.Result{Reason: qualify.ReasonDNS, Detail: err.Error(), DNS: took}
	}
	if len(addrs) == 1 {
		r := p.probeAddr(ctx, pr, rt, addrs[0])
		r.DNS = took
		return r
	}
	results := make([]qualify.Result, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { results[i] = p.probeAddr(ctx, pr, rt, a) })
	}
	wg.Wait()
	best := results[bestResult(results)]
	best.Targets, best.DNS = results, took
	return best
}

// bestResult picks the first 2xx, else the first final response, else
// the first result.
func bestResult(rs []qualify.Result) int {
	final := -1
	for i, r := range rs {
		if r.Reason == qualify.ReasonNone && r.Code >= 200 && r.Code < 300 {
			return i
		}
		if final < 0 && r.Reason == qualify.ReasonNone && r.Code >= 200 {
			final = i
		}
	}
	return max(final, 0)
}

// probeAddr runs one probe to dest, answering one digest challenge when
// the target has credentials.
func (p *Prober) probeAddr(ctx context.Context, pr probe, rt *route, dest netip.AddrPort) qualify.Result {
	tx := p.acquire(true)
	if tx == nil {
		p.stats.transportErrors.Add(1)
		return qualify.Result{Reason: qualify.ReasonTransport, Detail: errTooMany.Error(), Transport: rt.transport.String(), Dest: dest}
	}
	defer p.release(tx)
	if err := p.prepare(ctx, tx, pr, rt, dest); err != nil {
		p.stats.transportErrors.Add(1)
		return qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error(), Transport: rt.transport.String(), Dest: dest}
	}
	st := &tx.st
	st.sent = p.table.now()
	if tx.conn() == nil { // a stream's deadline started before its dial
		st.deadline = st.sent.add(pr.timeout)
	}
	p.transact(ctx, tx)
	if e := tx.ext; e.challenge != "" && st.reason == qualify.ReasonNone {
		p.answerChallenge(ctx, tx, pr)
	}
	return p.table.result(tx, rt.transport)
}

// errTooMany fails a probe when maxSlots are in flight.
var errTooMany = errors.New("too many probes in flight")

// acquire returns a transaction of the table's slab, with the extension
// of a blocking probe if blocking, or nil if none is free.
func (p *Prober) acquire(blocking bool) *transaction {
	tx := p.table.slab.acquire()
	if tx != nil && blocking {
		tx.ext = p.exts.Get().(*txExt)
	}
	return tx
}

// release resets tx and returns it to the slab, and its extension, if
// any, to the pool.
func (p *Prober) release(tx *transaction) {
	if e := tx.reset(); e != nil {
		p.exts.Put(e)
	}
	p.table.slab.release(tx)
}

// prepare fills the request of a new probe to dest and, for TCP/TLS,
// gets the connection (the deadline starts before the dial). A stream
// needs a blocking transaction (with ext).
func (p *Prober) prepare(ctx context.Context, tx *transaction, pr probe, rt *route, dest netip.AddrPort) error {
	st := &tx.st
	st.dest = dest
	r := &st.req
	r.ruri, r.cseq = rt.ruri, 1
	r.callID = rand.Uint64()
	if e := tx.ext; e != nil {
		_, e.wantChallenge = pr.credentials()
	}
	if rt.transport == udp {
		var err error
		r.hdr, err = p.udpHeaders(rt, dest)
		return err
	}
	h := p.baseHeaders(rt)
	st.deadline = p.table.now().add(pr.timeout)
	dctx, cancel := context.WithDeadline(ctx, p.table.time(st.deadline))
	defer cancel()
	conn, err := p.streams.get(dctx, streamKey{transport: rt.transport, addr: dest, serverName: rt.serverName()})
	if err != nil {
		return err
	}
	tx.ext.conn, h.sentBy, h.fromHost = conn, conn.sentBy, cmpOrStr(h.fromHost, conn.sentBy)
	r.hdr = p.hdrs.get(&h)
	return nil
}

// baseHeaders returns the headers of a request of rt but the Via
// sent-by, which depends on the local address.
func (p *Prober) baseHeaders(rt *route) headers {
	return headers{route: rt.proxy, transport: rt.transport.via(), userAgent: p.cfg.UserAgent,
		fromUser: cmpOrStr(rt.fromUser, p.cfg.FromUser), fromHost: cmpOrStr(rt.fromDomain, p.cfg.FromDomain)}
}

// udpHeaders returns the interned headers of a UDP request of rt to
// dest; on error, those of the wildcard address (the request is not
// sent).
func (p *Prober) udpHeaders(rt *route, dest netip.AddrPort) (*headers, error) {
	h := p.baseHeaders(rt)
	sentBy, err := p.udp.viaSentBy(dest.Addr())
	h.sentBy, h.fromHost = sentBy, cmpOrStr(h.fromHost, sentBy)
	return p.hdrs.get(&h), err
}

func cmpOrStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// serverName is the TLS server name to verify: the URI host.
func (rt *route) serverName() string { return strings.Trim(rt.host, "[]") }

// transact sends the request in the blocking transaction tx as a new
// client transaction, within the probe's deadline, and waits for its
// outcome.
func (p *Prober) transact(ctx context.Context, tx *transaction) {
	st := &tx.st
	now := p.table.now()
	if now >= st.deadline {
		st.reason = qualify.ReasonTimeout
		return
	}
	if !p.register(tx, now, nil) {
		return
	}
	p.stats.probes.Add(1)
	e := tx.ext
	e.buf = tx.appendRequest(e.buf[:0])
	if err := p.send(tx); err != nil {
		p.stats.transportErrors.Add(1)
		p.table.fail(tx, qualify.ReasonTransport, detailSendFailed)
	}
	p.wait(ctx, tx)
}

// register draws a fresh branch and adds tx, sent at now, to the pending
// table (see table.register). It returns false when the table is closed.
func (p *Prober) register(tx *transaction, now instant, ctx context.Context) bool {
	return p.table.register(tx, firstEvent(tx, now), ctx)
}

// send writes a blocking transaction's request to its stream or to UDP.
func (p *Prober) send(tx *transaction) error {
	if e := tx.ext; e.conn != nil {
		return e.conn.write(e.buf)
	}
	return p.udp.send(tx.ext.buf, tx.st.dest)
}

// wait blocks until the transaction completes or ctx is cancelled.
func (p *Prober) wait(ctx context.Context, tx *transaction) {
	select {
	case <-tx.ext.done:
	case <-ctx.Done():
		if p.table.abandon(tx) {
			tx.st.reason, tx.st.detail = qualify.ReasonTimeout, detailCanceled
		}
	}
}

// answerChallenge retries the probe once with digest credentials, as a new
// transaction (CSeq + 1, same Call-ID and From tag, RFC 3261 section
// 22.2) within the same deadline. If the challenge cannot be answered, the
// challenge itself is the probe's final response (a success, as Asterisk).
func (p *Prober) answerChallenge(ctx context.Context, tx *transaction, pr probe) {
	st, e := &tx.st, tx.ext
	creds, _ := pr.credentials()
	name, value, err := authorization(e.challenge, e.proxyAuth, creds, st.req.ruri)
	if err != nil {
		return
	}
	p.stats.authRetries.Add(1)
	e.authName, e.authValue = name, value
	st.req.cseq++
	st.code, e.challenge, e.wantChallenge, st.doublings = 0, "", false, 0
	p.transact(ctx, tx)
}

// result converts the outcome of a transaction sent over t.
func (tb *table) result(tx *transaction, t transport) qualify.Result {
	st := &tx.st
	r := qualify.Result{Sent: tb.time(st.sent), Reason: st.reason, Detail: st.detail.String(), Transport: t.String(), Dest: st.dest}
	if st.reason == qualify.ReasonNone {
		r.Code, r.RTT = int(st.code), time.Duration(st.recv-st.sent)
	}
	return r
}
