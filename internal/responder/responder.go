// Package responder is a small, fast SIP OPTIONS responder over UDP: the
// peer that qualifyd's demo and benchmarks qualify on loopback. It answers
// each OPTIONS with a final response chosen per request by a Decide
// function (200 OK by default), or drops it, so a scenario can script a
// healthy, lossy or dead peer. It is not a SIP stack: it copies the headers
// RFC 3261 section 8.2.6.2 requires and nothing else, and ignores whatever
// is not an OPTIONS request.
package responder

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Action is what the responder does with one request.
type Action struct {
	// Drop sends nothing, as a lost packet or a dead peer.
	Drop bool
	// Code is the final status code; zero means 200.
	Code int
}

// Decide chooses the action for one OPTIONS request from src.
type Decide func(src netip.AddrPort) Action

// DecideTransaction chooses the action for one OPTIONS request from src;
// transaction is the same for every retransmission of one request (its
// Call-ID, CSeq and top Via), so that a script can count requests rather
// than datagrams.
type DecideTransaction func(src netip.AddrPort, transaction string) Action

// Responder answers OPTIONS on one UDP socket until closed.
type Responder struct {
	conn     *net.UDPConn
	decide   Decide
	decideTx DecideTransaction
	wg       sync.WaitGroup
	once     sync.Once

	answered, dropped, ignored atomic.Uint64
}

// Listen opens addr ("127.0.0.1:0" for an ephemeral port) and starts
// answering; decide may be nil (always 200 OK).
func Listen(addr string, decide Decide) (*Responder, error) {
	if decide == nil {
		decide = func(netip.AddrPort) Action { return Action{} }
	}
	return listen(addr, &Responder{decide: decide})
}

// ListenTransactions is Listen with a decide that also sees which request
// (transaction) a datagram carries.
func ListenTransactions(addr string, decide DecideTransaction) (*Responder, error) {
	return listen(addr, &Responder{decideTx: decide})
}

// listen opens addr for r and starts answering.
func listen(addr string, r *Responder) (*Responder, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	_ = conn.SetReadBuffer(4 << 20)
	_ = conn.SetWriteBuffer(4 << 20)
	r.conn = conn
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr returns the socket's local address.
func (r *Responder) Addr() netip.AddrPort {
	return r.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Counts returns how many requests were answered, dropped by Decide, and
// ignored (not an OPTIONS request, or malformed).
func (r *Responder) Counts() (answered, dropped, ignored uint64) {
	return r.answered.Load(), r.dropped.Load(), r.ignored.Load()
}

// Close stops the responder and waits for it; idempotent.
func (r *Responder) Close() error {
	var err error
	r.once.Do(func() {
		err = r.conn.Close()
		r.wg.Wait()
	})
	return err
}

// Serve runs until ctx is done, then closes r.
func (r *Responder) Serve(ctx context.Context) {
	<-ctx.Done()
	r.Close()
}

func (r *Responder) serve() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	out := make([]byte, 0, 2048)
	for {
		n, src, err := r.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		out = r.handle(buf[:n], src, out[:0])
		if len(out) > 0 {
			_, _ = r.conn.WriteToUDPAddrPort(out, src)
		}
	}
}

// handle returns the response to one datagram, or nothing.
func (r *Responder) handle(msg []byte, src netip.AddrPort, out []byte) []byte {
	req, ok := parseOptions(msg)
	if !ok {
		r.ignored.Add(1)
		return out
	}
	var act Action
	if r.decideTx != nil {
		act = r.decideTx(src, req.transaction())
	} else {
		act = r.decide(src)
	}
	if act.Drop {
		r.dropped.Add(1)
		return out
	}
	r.answered.Add(1)
	return appendResponse(out, req, act.Code)
}
