package sipprobe

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Start starts one probe of t and returns at once; done receives tag and
// the result exactly once: from the prober's receive or timer goroutine,
// from the goroutine of a DNS lookup or a TCP/TLS dial, or before Start
// returns when the probe cannot be sent. done must not block. The caller
// tells its probes apart by tag, so that one done serves them all and no
// closure lives per probe.
//
// The deadline is t.Timeout (qualify.SIPTransactionTimeout when <= 0)
// from the first send; over TCP/TLS it starts before the connection is
// set up, so a probe never lasts longer than that after DNS. DNS
// resolution has its own timeout (Config.DNSTimeout) and is reported in
// Result.DNS. A host name resolving to several targets probes them all
// at once (see qualify.Result.Targets).
//
// Cancelling ctx ends the probe promptly with reason timeout and detail
// "canceled". The table watches each distinct cancellable context once,
// so ctx should be long-lived and shared by many probes; it must be
// comparable, as the standard library's contexts are.
//
// A target whose Options.Unresolved is set gets that note added to the
// detail of a failure or of a response of 300 or more.
func (p *Prober) Start(ctx context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	if t.Options != nil && t.Options.Unresolved != "" {
		done = noted(t.Options.Unresolved, done)
	}
	pr := spec{opts: t.Options, timeout: t.Timeout}
	var fast route
	if fastRoute(t.URI, t.Options, &fast) {
		p.startUDP(ctx, pr, &fast, fast.dest, tag, done)
		return
	}
	rt, err := p.routes.get(t.URI, t.Options)
	switch {
	case err != nil:
		p.stats.transportErrors.Add(1)
		done(tag, qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error()})
	case !rt.addr.IsValid():
		go p.probeHost(ctx, pr, rt, tag, done)
	default:
		p.startRoute(ctx, pr, rt, rt.dest, tag, done)
	}
}

// noted returns done with note added to the result's detail when the
// probe failed or was answered 300 or more. Only the probes of an
// endpoint whose transport or auth is not defined make this closure.
func noted(note string, done func(uint64, qualify.Result)) func(uint64, qualify.Result) {
	return func(tag uint64, r qualify.Result) {
		if r.Reason != qualify.ReasonNone || r.Code >= 300 {
			r.Detail = strings.TrimPrefix(r.Detail+"; "+note, "; ")
		}
		done(tag, r)
	}
}

// Probe sends one probe of t, as Start does, and waits for its result.
func (p *Prober) Probe(ctx context.Context, t probe.Target) qualify.Result {
	w := p.waiters.Get().(*waiter)
	p.Start(ctx, t, 0, w.done)
	r := <-w.res
	p.waiters.Put(w)
	return r
}

// waiter is how Probe waits for the result of Start. Waiters are pooled
// with their done function, so that a probe makes no closure.
type waiter struct {
	res  chan qualify.Result
	done func(uint64, qualify.Result)
}

func newWaiter() *waiter {
	w := &waiter{res: make(chan qualify.Result, 1)}
	w.done = func(_ uint64, r qualify.Result) { w.res <- r }
	return w
}

// spec is what a probe needs of its Target. It is passed by value, so
// the Target itself never escapes to the heap.
type spec struct {
	opts    *probe.Options
	timeout time.Duration
}

// hasCredentials reports whether the target answers digest challenges.
func (pr spec) hasCredentials() bool {
	return pr.opts != nil && pr.opts.Auth.Username != ""
}

// startRoute starts the probe of rt to dest: over UDP at once, over
// TCP/TLS in a goroutine that gets the connection (perhaps dialing it)
// and writes the request. rt is the cached route, which may escape.
func (p *Prober) startRoute(ctx context.Context, pr spec, rt *route, dest netip.AddrPort, tag uint64, done func(uint64, qualify.Result)) {
	if rt.transport == udp {
		p.startUDP(ctx, pr, rt, dest, tag, done)
		return
	}
	go p.startStream(ctx, pr, rt, dest, tag, done)
}

// startUDP starts the probe of rt to dest over UDP. rt does not escape.
func (p *Prober) startUDP(ctx context.Context, pr spec, rt *route, dest netip.AddrPort, tag uint64, done func(uint64, qualify.Result)) {
	tx, err := p.newTx(pr, rt, dest)
	if err == nil {
		tx.rec.req.hdr, err = p.udpHeaders(rt, dest)
	}
	if err != nil {
		p.abort(tx, udp, dest, err, tag, done)
		return
	}
	tx.cb, tx.tag = done, tag
	now := p.table.now()
	p.transmit(ctx, tx, now, deadlineAfter(now, pr.timeout))
}

// startStream starts the probe of rt to dest over TCP or TLS: the
// deadline starts before the connection is got, which may mean dialing.
func (p *Prober) startStream(ctx context.Context, pr spec, rt *route, dest netip.AddrPort, tag uint64, done func(uint64, qualify.Result)) {
	deadline := deadlineAfter(p.table.now(), pr.timeout)
	tx, err := p.newTx(pr, rt, dest)
	if err == nil {
		err = p.connect(ctx, tx, rt, deadline)
	}
	if err != nil {
		p.abort(tx, rt.transport, dest, err, tag, done)
		return
	}
	tx.cb, tx.tag = done, tag
	p.transmit(ctx, tx, p.table.now(), deadline)
}

// errTooMany fails a probe when maxSlots are in flight.
var errTooMany = errors.New("too many probes in flight")

// newTx returns a transaction of the slab with the request of a new
// probe of rt to dest but its headers; a probe over TCP/TLS or with
// credentials gets an extension.
func (p *Prober) newTx(pr spec, rt *route, dest netip.AddrPort) (*transaction, error) {
	tx := p.table.slab.acquire()
	if tx == nil {
		return nil, errTooMany
	}
	if rt.transport != udp || pr.hasCredentials() {
		tx.ext = p.exts.Get().(*txExt)
		if pr.hasCredentials() {
			tx.ext.auth, tx.ext.wantChallenge = pr.opts.Auth, true
		}
	}
	tx.rec.dest = dest
	r := &tx.rec.req
	r.ruri, r.cseq, r.callID = rt.ruri, 1, rand.Uint64()
	return tx, nil
}

// abort ends a probe that could not be sent: it releases tx, if any,
// counts a transport error, and delivers it.
func (p *Prober) abort(tx *transaction, t transport, dest netip.AddrPort, err error, tag uint64, done func(uint64, qualify.Result)) {
	if tx != nil {
		p.release(tx)
	}
	p.stats.transportErrors.Add(1)
	done(tag, qualify.Result{Reason: qualify.ReasonTransport, Detail: err.Error(), Transport: t.String(), Dest: dest})
}

// release resets tx and returns it to the slab, and its extension, if
// any, to the pool.
func (p *Prober) release(tx *transaction) {
	if e := tx.reset(); e != nil {
		p.exts.Put(e)
	}
	p.table.slab.release(tx)
}

// connect gets the connection of a stream transaction, dialing it within
// the deadline, and sets the request's headers for it.
func (p *Prober) connect(ctx context.Context, tx *transaction, rt *route, deadline instant) error {
	dctx, cancel := context.WithDeadline(ctx, p.table.time(deadline))
	defer cancel()
	conn, dialed, err := p.streams.get(dctx, streamKey{transport: rt.transport, addr: tx.rec.dest, serverName: rt.serverName(), tls: rt.tls}, nil)
	if err != nil {
		return err
	}
	h := p.baseHeaders(rt)
	tx.ext.conn, tx.ext.reused = conn, !dialed && !p.cfg.LegacyStreams
	h.sentBy, h.fromHost = conn.sentBy, cmpOrStr(h.fromHost, conn.sentBy)
	tx.rec.req.hdr = p.hdrs.get(&h)
	return nil
}

// baseHeaders returns the headers of a request of rt but the Via
// sent-by, which depends on the local address.
func (p *Prober) baseHeaders(rt *route) headers {
	return headers{route: rt.proxy, transport: rt.transport.via(), userAgent: p.cfg.UserAgent,
		fromUser: cmpOrStr(rt.fromUser, p.cfg.FromUser), fromHost: cmpOrStr(rt.fromDomain, p.cfg.FromDomain)}
}

// udpHeaders returns the interned headers of a UDP request of rt to
// dest.
func (p *Prober) udpHeaders(rt *route, dest netip.AddrPort) (*headers, error) {
	h := p.baseHeaders(rt)
	sentBy, err := p.udp.viaSentBy(dest.Addr())
	if err != nil {
		return nil, err
	}
	h.sentBy, h.fromHost = sentBy, cmpOrStr(h.fromHost, sentBy)
	return p.hdrs.get(&h), nil
}

func cmpOrStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// serverName is the TLS server name to verify: the URI host.
func (rt *route) serverName() string { return strings.Trim(rt.host, "[]") }

// transmit starts the prepared transaction tx at now with deadline: it
// starts its machine, registers it and sends its request. The caller
// owns tx alone (no references) and must have set cb; transmit shares it
// between itself, until the send is over, and the completion.
func (p *Prober) transmit(ctx context.Context, tx *transaction, now, deadline instant) {
	if tx.rec.req.cseq == 1 {
		tx.rec.sent = now // the probe's first transaction
	}
	tx.refs.Store(2)
	a := tx.fsm.start(now, deadline, tx.conn() != nil, tx.ext != nil && tx.ext.reused)
	if !a.send || !p.table.register(tx, a.next, ctx) {
		p.unref(tx)
		p.finish(tx)
		return
	}
	p.stats.probes.Add(1)
	if err := p.send(tx, deadline); err != nil {
		p.stats.transportErrors.Add(1)
		p.table.fail(tx, qualify.ReasonTransport, detailSendFailed)
	}
	p.unref(tx)
}

// send writes the request of the registered transaction tx to its stream
// or to UDP. The bytes are needed only for this send: a retransmission
// builds them again, so a probe in flight holds no buffer.
func (p *Prober) send(tx *transaction, deadline instant) error {
	bp := p.bufs.Get().(*[]byte)
	b := tx.appendRequest((*bp)[:0])
	var err error
	if c := tx.conn(); c != nil {
		err = c.write(b, p.table.time(deadline))
	} else {
		err = p.udp.send(b, tx.rec.dest)
	}
	*bp = b[:0]
	p.bufs.Put(bp)
	return err
}

// finish delivers the result of the completed transaction tx, or, when
// it was answered with a digest challenge, leaves tx to its last owner
// to retry (see retry). The table calls it outside its lock.
func (p *Prober) finish(tx *transaction) {
	if e := tx.ext; e != nil && e.challenge != "" && tx.fsm.reason == qualify.ReasonNone {
		e.retry = true
		p.unref(tx)
		return
	}
	p.deliver(tx)
}

// deliver hands the result of the completed transaction tx to its
// callback, dropping the completion's reference.
func (p *Prober) deliver(tx *transaction) {
	res, tag, done := p.table.result(tx), tx.tag, tx.cb
	p.unref(tx)
	done(tag, res)
}

// unref drops one owner of a transaction; the last one releases it, or
// retries it. The sending goroutine may still read the request when the
// answer comes, so the retry, which rewrites it, waits for both owners.
func (p *Prober) unref(tx *transaction) {
	if tx.refs.Add(-1) != 0 {
		return
	}
	if e := tx.ext; e != nil && e.retry {
		p.retry(tx)
		return
	}
	p.release(tx)
}

// result converts the outcome of a transaction.
func (tb *table) result(tx *transaction) qualify.Result {
	rec, m := &tx.rec, &tx.fsm
	r := qualify.Result{Sent: tb.time(rec.sent), Reason: m.reason, Detail: m.detail.String(), Transport: tx.transport().String(), Dest: rec.dest}
	if m.reason == qualify.ReasonNone {
		r.Code, r.RTT = int(m.code), time.Duration(rec.recv-rec.sent)
		r.RetryAfter = time.Duration(tx.retryAfter) * time.Second
	}
	return r
}
