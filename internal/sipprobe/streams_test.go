package sipprobe

import (
	"context"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// testStreams returns a pool whose readers read until the connection
// ends, and dial, if set, in place of the network's.
func testStreams(dial func(ctx context.Context, key streamKey) (net.Conn, net.Conn, error)) *streams {
	s := &streams{slots: map[streamKey]*streamSlot{}, tls: tlsBase(nil), idle: time.Minute,
		clock: func() instant { return 1 }, connect: dial}
	s.serve = func(sc *streamConn) { _, _ = io.Copy(io.Discard, sc); sc.breakConn() }
	return s
}

// TestStreamsCloseWhileDialing: a pool closed while a probe dials (its
// slot locked) neither deadlocks nor keeps the connection: get and close
// take the pool's and the slot's locks in one order.
func TestStreamsCloseWhileDialing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var s *streams
	closed := make(chan struct{})
	s = testStreams(func(ctx context.Context, key streamKey) (net.Conn, net.Conn, error) {
		go func() { s.close(); close(closed) }()
		// Until close has marked the pool closed or holds its lock.
		for s.mu.TryLock() {
			done := s.closed
			s.mu.Unlock()
			if done {
				break
			}
			runtime.Gosched()
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		return c, c, err
	})
	got := make(chan error, 1)
	go func() {
		_, _, err := s.get(t.Context(), streamKey{transport: tcp, addr: netip.MustParseAddrPort("192.0.2.1:5060")}, nil)
		got <- err
	}()
	// A failure bound, not a margin: both return at once when they work.
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("get on a closed pool returned a connection")
		}
		<-closed
	case <-time.After(10 * time.Second):
		t.Fatal("get and close deadlocked: get holds the slot and waits for the pool, close the reverse")
	}
}

// TestStreamsForgetEndedSlots: a destination whose dial failed, or whose
// connection ended, keeps no slot: the pool holds the destinations with
// a connection or a dial in progress, not every one ever probed.
func TestStreamsForgetEndedSlots(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close() // the peer ends every connection
		}
	}()
	s := testStreams(nil)
	live := streamKey{transport: tcp, addr: netip.MustParseAddrPort(ln.Addr().String())}
	if _, _, err := s.get(t.Context(), live, nil); err != nil {
		t.Fatal(err)
	}
	refused, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := streamKey{transport: tcp, addr: netip.MustParseAddrPort(refused.Addr().String())}
	_ = refused.Close()
	if _, _, err := s.get(t.Context(), dead, nil); err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	s.close() // waits for the reader of the ended connection
	if n := len(s.slots); n != 0 {
		t.Fatalf("%d slots kept after their connections ended or failed, want 0", n)
	}
}
