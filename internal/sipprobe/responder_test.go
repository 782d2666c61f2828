package sipprobe

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/emiago/sipgo/sip"
)

// exchange is one request received by a test responder and the means to
// answer it.
type exchange struct {
	req  *sip.Request
	raw  []byte
	src  netip.AddrPort
	peer *responder
	conn net.Conn // stream transports; nil for UDP
}

// write sends b back to the requester.
func (x *exchange) write(b []byte) {
	if x.conn != nil {
		_, _ = x.conn.Write(b)
		return
	}
	_, _ = x.peer.udp.WriteToUDPAddrPort(b, x.src)
}

// reply answers with code; edit may change the response before it is sent.
func (x *exchange) reply(code int, edit ...func(*sip.Response)) {
	x.write(x.response(code, edit...))
}

// response builds a response to the request with sipgo.
func (x *exchange) response(code int, edit ...func(*sip.Response)) []byte {
	res := sip.NewResponseFromRequest(x.req, code, "Test", nil)
	cl := sip.ContentLengthHeader(0)
	res.AppendHeader(&cl)
	for _, e := range edit {
		e(res)
	}
	return []byte(res.String())
}

// responder is an in-process SIP peer on loopback: UDP, TCP or TLS. Each
// received request is passed to handle on the receiving goroutine and
// recorded on got.
type responder struct {
	t        *testing.T
	udp      *net.UDPConn
	ln       net.Listener
	addr     netip.AddrPort
	handle   func(x *exchange)
	got      chan *sip.Request
	mu       sync.Mutex
	accepted int
	// hangups receives once per stream connection whose read ended: the
	// prober closed it (or the test ended).
	hangups chan struct{}
	wg      sync.WaitGroup
}

// newUDPResponder starts a UDP responder on 127.0.0.1.
func newUDPResponder(t *testing.T, handle func(x *exchange)) *responder {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &responder{t: t, udp: c, handle: handle, got: make(chan *sip.Request, 1024)}
	r.addr = c.LocalAddr().(*net.UDPAddr).AddrPort()
	r.wg.Add(1)
	go r.serveUDP()
	t.Cleanup(func() { _ = c.Close(); r.wg.Wait() })
	return r
}

func (r *responder) serveUDP() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, src, err := r.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		r.dispatch(append([]byte(nil), buf[:n]...), src, nil)
	}
}

// dispatch parses one request and hands it to the handler.
func (r *responder) dispatch(raw []byte, src netip.AddrPort, conn net.Conn) {
	msg, err := sip.ParseMessage(raw)
	req, ok := msg.(*sip.Request)
	if err != nil || !ok {
		return // responses (e.g. to our own OPTIONS) are not requests
	}
	req.SetSource(src.String())
	select {
	case r.got <- req:
	default:
	}
	if r.handle != nil {
		r.handle(&exchange{req: req, raw: raw, src: src, peer: r, conn: conn})
	}
}

// newStreamResponder starts a TCP responder, or TLS with cfg.
func newStreamResponder(t *testing.T, cfg *tls.Config, handle func(x *exchange)) *responder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	r := &responder{t: t, ln: ln, handle: handle, got: make(chan *sip.Request, 1024), hangups: make(chan struct{}, 64)}
	r.addr = ln.Addr().(*net.TCPAddr).AddrPort()
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() { _ = ln.Close(); r.wg.Wait() })
	return r
}

func (r *responder) accept() {
	defer r.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.accepted++
		r.mu.Unlock()
		conns = append(conns, c)
		r.wg.Add(1)
		go r.serveConn(c)
	}
}

func (r *responder) serveConn(c net.Conn) {
	defer r.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	src := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	for {
		msg, err := readStreamMessage(br, nil, 1<<20)
		if err != nil {
			select {
			case r.hangups <- struct{}{}:
			default:
			}
			return
		}
		r.dispatch(msg, src, c)
	}
}

// connections returns how many connections the stream responder accepted.
func (r *responder) connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// next returns the next recorded request.
func (r *responder) next(t *testing.T) *sip.Request {
	t.Helper()
	select {
	case req := <-r.got:
		return req
	case <-t.Context().Done():
		t.Fatal("no request")
	}
	return nil
}
