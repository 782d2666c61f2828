package sipprobe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// streamKey identifies one reused TCP or TLS connection.
type streamKey struct {
	transport  transport
	addr       netip.AddrPort
	serverName string     // TLS only
	tls        *probe.TLS // TLS only: the route's profile, nil for Config.TLS
}

// streamConn is one TCP or TLS connection with its reader goroutine.
//
// A flow that a middlebox dropped without a reset fails no read or
// write until the kernel gives up (TCP keepalives, see keepAlive, or
// about 15 minutes of retransmissions), so more rules end a connection
// (docs/qualify-semantics.md §3.2). A transaction that times out with no
// byte received on the connection since its send retires it at that
// first timeout, and a probe sent on a connection it did not dial that
// has heard nothing by its midpoint sends the request again on a fresh
// one and retires the old (see machine): no new probe takes a retired
// connection, and it is closed when its last transaction ends. No
// request sent on it for idle, the read deadline, closes it too, so that
// a destination no longer probed keeps no connection.
type streamConn struct {
	c         net.Conn
	raw       net.Conn  // the TCP connection under c, closed without blocking
	key       streamKey // its slot
	transport transport // tcp or tlsTransport
	sentBy    string
	idle      time.Duration
	// broken: no probe takes it any more (it failed, or is retired).
	broken atomic.Bool
	// heard is the instant of the last byte received, on the table's
	// clock (never: 0, before any send).
	heard atomic.Int64
	clock func() instant
	// legacy and silent keep the rule before the redial (see
	// Config.LegacyStreams): silent counts the transactions in a row
	// that timed out since the last byte received.
	legacy bool
	silent atomic.Int32
	// inflight counts the registered transactions sent on it; table.mu.
	inflight int

	wmu   sync.Mutex
	until time.Time // the read deadline; wmu
}

// write sends one message and keeps the connection open for at least
// idle, and until keep (the deadline of the transaction it carries); a
// failed write breaks the connection.
func (sc *streamConn) write(b []byte, keep time.Time) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	now := time.Now()
	if until := later(now.Add(sc.idle), keep.Add(time.Second)); until.After(sc.until) {
		sc.until = until
		_ = sc.c.SetReadDeadline(until)
	}
	_ = sc.c.SetWriteDeadline(now.Add(T2))
	if _, err := sc.c.Write(b); err != nil {
		sc.breakConn()
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (sc *streamConn) breakConn() {
	sc.broken.Store(true)
	_ = sc.c.Close()
}

// timedOut counts a transaction on sc, first sent at sent, that timed
// out, and reports whether sc heard nothing since: the caller then
// retires sc. With legacy, only the second such timeout in a row does.
func (sc *streamConn) timedOut(sent instant) bool {
	if sc.legacy {
		return sc.silent.Add(1) == 2
	}
	return !sc.heardSince(sent)
}

// heardSince reports whether a byte was received on sc at or after i.
func (sc *streamConn) heardSince(i instant) bool { return instant(sc.heard.Load()) >= i }

// drop breaks sc by closing its TCP connection, which never blocks
// (a TLS close_notify to a peer that stopped reading could); the reader
// then fails the transactions still on it, if any, and the next probe
// redials.
func (sc *streamConn) drop() {
	sc.broken.Store(true)
	_ = sc.raw.Close()
}

// Read reads from the connection; any byte received sets heard and
// resets silent.
func (sc *streamConn) Read(b []byte) (int, error) {
	n, err := sc.c.Read(b)
	if n > 0 {
		sc.heard.Store(int64(sc.clock()))
		sc.silent.Store(0)
	}
	return n, err
}

// streamSlot holds the connection of one destination; its mutex
// serialises dialing so concurrent probes share one connection.
type streamSlot struct {
	mu   sync.Mutex
	conn *streamConn // guarded by mu; read under streams.mu when users is 0
	// users counts the gets holding the slot, guarded by streams.mu: the
	// slot leaves the pool when none does and it has no live connection.
	users int
}

// streams is the pool of TCP/TLS connections, one per destination
// with a connection or a dial in progress, reconnected on demand.
//
// Lock order: a streamSlot's mu before streams.mu, never the reverse
// (get starts a reader while it holds its slot; close breaks the
// connections after releasing mu).
type streams struct {
	mu     sync.Mutex
	slots  map[streamKey]*streamSlot
	closed bool
	tls    *tls.Config
	// idle is how long a connection without a request stays open.
	idle time.Duration
	// clock and legacy are given to every connection (see streamConn).
	clock  func() instant
	legacy bool
	wg     sync.WaitGroup
	// serve runs the reader of a new connection.
	serve func(sc *streamConn)
	// connect, if set, replaces dial (tests).
	connect func(ctx context.Context, key streamKey) (net.Conn, net.Conn, error)
}

// get returns the live connection to key, dialing one (bounded by ctx) if
// there is none, the last one broke or it is stale (a redial's old one),
// and reports whether it dialed.
func (s *streams) get(ctx context.Context, key streamKey, stale *streamConn) (*streamConn, bool, error) {
	slot, err := s.slot(key)
	if err != nil {
		return nil, false, err
	}
	defer s.leave(key, slot)
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.conn != nil && slot.conn != stale && !slot.conn.broken.Load() {
		return slot.conn, false, nil
	}
	dial := s.dial
	if s.connect != nil {
		dial = s.connect
	}
	c, raw, err := dial(ctx, key)
	if err != nil {
		return nil, false, err
	}
	sc := &streamConn{c: c, raw: raw, key: key, transport: key.transport, idle: s.idle,
		clock: s.clock, legacy: s.legacy, sentBy: hostPort(c.LocalAddr().(*net.TCPAddr).AddrPort())}
	if !s.start(sc) {
		return nil, false, errors.New("prober closed")
	}
	slot.conn = sc
	return sc, true, nil
}

func (s *streams) slot(key streamKey) (*streamSlot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("prober closed")
	}
	slot := s.slots[key]
	if slot == nil {
		slot = &streamSlot{}
		s.slots[key] = slot
	}
	slot.users++
	return slot, nil
}

// leave ends a get's hold of key's slot; the last one out removes it when
// it has no live connection (the dial failed, or the connection broke).
func (s *streams) leave(key streamKey, slot *streamSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot.users--
	if slot.users == 0 && (slot.conn == nil || slot.conn.broken.Load()) && s.slots[key] == slot {
		delete(s.slots, key)
	}
}

// forget removes sc's slot once sc's reader has ended, unless a get holds
// the slot or it has another connection.
func (s *streams) forget(sc *streamConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot := s.slots[sc.key]; slot != nil && slot.users == 0 && slot.conn == sc {
		delete(s.slots, sc.key)
	}
}

// start runs the reader of sc unless the pool is closed.
func (s *streams) start(sc *streamConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = sc.c.Close()
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve(sc)
		s.forget(sc)
	}()
	return true
}

// dial connects to key.addr and, for TLS, completes a handshake checked
// as key.tls says (clientConfig); it returns the connection and the TCP
// one under it.
func (s *streams) dial(ctx context.Context, key streamKey) (net.Conn, net.Conn, error) {
	d := net.Dialer{KeepAliveConfig: keepAlive}
	c, err := d.DialContext(ctx, "tcp", key.addr.String())
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	if key.transport != tlsTransport {
		return c, c, nil
	}
	tc := tls.Client(c, clientConfig(s.tls, key.tls, key.serverName))
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("tls: %w", err)
	}
	return tc, c, nil
}

// close closes every connection and waits for the readers. A get that
// dials meanwhile finds the pool closed when it would start its reader.
func (s *streams) close() {
	s.mu.Lock()
	s.closed = true
	slots := slices.Collect(maps.Values(s.slots))
	s.mu.Unlock()
	for _, slot := range slots {
		slot.mu.Lock()
		if slot.conn != nil {
			slot.conn.breakConn()
		}
		slot.mu.Unlock()
	}
	s.wg.Wait()
}

// serveStream reads messages from sc until it breaks (an error, idle,
// or closed once retired), then fails the probes still waiting on it.
func (p *Prober) serveStream(sc *streamConn) {
	r := bufio.NewReaderSize(sc, 4096)
	var buf []byte
	src := sc.c.RemoteAddr().(*net.TCPAddr).AddrPort()
	for {
		var err error
		buf, err = readStreamMessage(r, buf[:0], p.cfg.MaxMessageSize)
		if errors.Is(err, errOversized) {
			p.stats.oversized.Add(1)
		}
		if err != nil {
			break
		}
		p.handle(buf, src, sc, p.table.now())
	}
	sc.breakConn()
	p.table.failConn(sc)
}

var errOversized = errors.New("message too large")

// readStreamMessage reads one message (headers, then Content-Length bytes
// of body, RFC 3261 section 18.3) into buf, skipping keep-alive CRLFs.
func readStreamMessage(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return buf, errOversized // one header line longer than the reader
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == 0 && (len(line) <= 2 && (line[0] == '\r' || line[0] == '\n')) {
			continue // keep-alive (RFC 5626 section 3.5.1)
		}
		if len(buf)+len(line) > max {
			return buf, errOversized
		}
		buf = append(buf, line...)
		if len(line) <= 2 && (line[0] == '\r' || line[0] == '\n') {
			break
		}
	}
	return readBody(r, buf, max)
}

// readBody appends the body announced by the headers in buf.
func readBody(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	var m message
	if err := parseMessage(buf, &m); err != nil || m.contentLen <= 0 {
		return buf, nil // handle counts the malformed; no body to skip
	}
	if len(buf)+m.contentLen > max {
		return buf, errOversized
	}
	n := len(buf)
	buf = slices.Grow(buf, m.contentLen)[:n+m.contentLen]
	_, err := io.ReadFull(r, buf[n:])
	return buf, err
}
