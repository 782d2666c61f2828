package sipprobe

import (
	"crypto/tls"
	"maps"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// mutePeer is a TCP peer that answers OPTIONS until told to go silent on
// a connection: it then stops reading it and answering, without closing
// it, as a flow a middlebox dropped looks from the prober's side.
type mutePeer struct {
	*responder
	mu      sync.Mutex
	last    net.Conn      // the connection of the last request
	mute    net.Conn      // the connection to go silent on at its next request
	release chan struct{} // ends the silence at the test's end
}

func newMutePeer(t *testing.T, cfg *tls.Config) *mutePeer {
	m := &mutePeer{release: make(chan struct{})}
	m.responder = newStreamResponder(t, cfg, func(x *exchange) {
		m.mu.Lock()
		mute := m.mute == x.conn
		m.last = x.conn
		m.mu.Unlock()
		if mute {
			<-m.release // stop reading: the next requests stay in the kernel's buffer
			return
		}
		if x.req.Recipient.User != "ignore" {
			x.reply(200)
		}
	})
	t.Cleanup(func() { close(m.release) }) // before the responder's own cleanup
	return m
}

// silence makes the peer stop reading the connection of the last request.
func (m *mutePeer) silence() {
	m.mu.Lock()
	m.mute = m.last
	m.mu.Unlock()
}

// TestTCPSilentFlowIsRedialed: a connection that goes silent, as a flow
// a middlebox forgot, costs no failure: the probe sent on it, unanswered
// at its midpoint, is sent again on a fresh connection and answered
// there, and the next probe reuses that one. Over TCP and TLS alike.
func TestTCPSilentFlowIsRedialed(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		m := newMutePeer(t, nil)
		silentThenRedialed(t, m, newProber(t, Config{}), uriOf(m.responder, ";transport=tcp"))
	})
	t.Run("tls", func(t *testing.T) {
		ca, pool := newCA(t)
		m := newMutePeer(t, ca.serverConfig(t, "127.0.0.1"))
		p := newProber(t, Config{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
		silentThenRedialed(t, m, p, "sips:pbx@"+m.addr.String())
	})
}

func silentThenRedialed(t *testing.T, m *mutePeer, p *Prober, uri string) {
	tg := target(uri, 2*time.Second) // the fresh connection has 1 s for its dial, handshake and answer
	if res := p.Probe(t.Context(), tg); res.Code != 200 {
		t.Fatalf("first probe: %+v", res)
	}
	m.silence()
	res := p.Probe(t.Context(), tg)
	if s := p.Stats(); res.Code != 200 || m.connections() != 2 || s.Redials != 1 || s.Timeouts != 0 {
		t.Fatalf("probe on the silent connection: %+v on %d connections, stats %+v; want 200 on a second one after one redial",
			res, m.connections(), s)
	}
	if res := p.Probe(t.Context(), tg); res.Code != 200 || m.connections() != 2 || p.Stats().Redials != 1 {
		t.Fatalf("next probe: %+v on %d connections, want 200 on the fresh one", res, m.connections())
	}
}

// TestTCPDeadPeerCostsOneFailurePerProbe: a peer that accepts connections
// but answers nothing costs one timeout per probe and at most one extra
// dial. The probe on the reused connection redials once at its midpoint,
// and both connections, silent, are closed at its timeout; the next probe
// dials its own, which it never redials. Once the peer answers again, the
// next probe does.
func TestTCPDeadPeerCostsOneFailurePerProbe(t *testing.T) {
	m := newMutePeer(t, nil)
	p := newProber(t, Config{})
	answered := target(uriOf(m.responder, ";transport=tcp"), time.Second)
	dead := target("sip:ignore@"+m.addr.String()+";transport=tcp", time.Second)
	if res := p.Probe(t.Context(), answered); res.Code != 200 {
		t.Fatalf("first probe: %+v", res)
	}
	for i, want := range []struct{ conns, hangups int }{{2, 2}, {3, 1}} {
		res := p.Probe(t.Context(), dead)
		if s := p.Stats(); res.Reason != qualify.ReasonTimeout || m.connections() != want.conns || s.Redials != 1 {
			t.Fatalf("dead probe %d: %+v on %d connections, stats %+v; want a timeout on %d, one redial in all",
				i, res, m.connections(), s, want.conns)
		}
		for range want.hangups {
			select {
			case <-m.hangups:
			case <-time.After(10 * time.Second): // a deadline for the observable close, not a margin
				t.Fatalf("dead probe %d: the silent connections were not closed", i)
			}
		}
	}
	if res := p.Probe(t.Context(), answered); res.Code != 200 || m.connections() != 4 {
		t.Fatalf("after the dead probes: %+v on %d connections, want 200 on a fourth one", res, m.connections())
	}
}

// TestTCPTimeoutWithAnswersMeanwhileKeepsTheConnection: a probe that
// times out while another on its connection is answered neither redials
// nor closes it: the connection is alive, the peer ignores that request.
func TestTCPTimeoutWithAnswersMeanwhileKeepsTheConnection(t *testing.T) {
	m := newMutePeer(t, nil)
	p := newProber(t, Config{})
	ignored := target("sip:ignore@"+m.addr.String()+";transport=tcp", 2*time.Second)
	answered := target(uriOf(m.responder, ";transport=tcp"), 2*time.Second)
	if res := p.Probe(t.Context(), answered); res.Code != 200 {
		t.Fatalf("first probe: %+v", res)
	}
	m.next(t)
	done := make(chan qualify.Result, 1)
	p.Start(t.Context(), ignored, 0, func(_ uint64, r qualify.Result) { done <- r })
	m.next(t) // the ignored request is out: the answer below comes after it, within its first half
	if res := p.Probe(t.Context(), answered); res.Code != 200 {
		t.Fatalf("answered probe: %+v", res)
	}
	if res := <-done; res.Reason != qualify.ReasonTimeout {
		t.Fatalf("ignored probe: %+v, want a timeout", res)
	}
	if res := p.Probe(t.Context(), answered); res.Code != 200 || m.connections() != 1 || p.Stats().Redials != 0 {
		t.Fatalf("after the timeout: %+v on %d connections, %d redials; want 200 on the first, no redial",
			res, m.connections(), p.Stats().Redials)
	}
}

// TestTCPIdleConnectionIsClosed: a connection on which no request was
// sent for StreamIdle is closed (a destination no longer probed), and the
// next probe dials a new one.
func TestTCPIdleConnectionIsClosed(t *testing.T) {
	m := newMutePeer(t, nil)
	p := newProber(t, Config{StreamIdle: 200 * time.Millisecond})
	tg := target(uriOf(m.responder, ";transport=tcp"), 300*time.Millisecond)
	if res := p.Probe(t.Context(), tg); res.Code != 200 {
		t.Fatalf("probe: %+v", res)
	}
	select {
	case <-m.hangups:
	case <-time.After(10 * time.Second): // a deadline for the observable close, not a margin
		t.Fatal("the idle connection was not closed")
	}
	if res := p.Probe(t.Context(), tg); res.Code != 200 || m.connections() != 2 {
		t.Fatalf("after idle: %+v on %d connections, want 200 on a second one", res, m.connections())
	}
}

// TestTCPLegacyStreams: with Config.LegacyStreams, the rules before the
// redial, against which qualifyd-lab dropflow measures it: a silent
// connection costs two timeouts, closed at the second, and the third
// probe dials.
func TestTCPLegacyStreams(t *testing.T) {
	m := newMutePeer(t, nil)
	p := newProber(t, Config{LegacyStreams: true})
	tg := target(uriOf(m.responder, ";transport=tcp"), 300*time.Millisecond)
	if res := p.Probe(t.Context(), tg); res.Code != 200 {
		t.Fatalf("first probe: %+v", res)
	}
	m.silence()
	for i := range 2 {
		if res := p.Probe(t.Context(), tg); res.Reason != qualify.ReasonTimeout || m.connections() != 1 {
			t.Fatalf("silent probe %d: %+v on %d connections, want a timeout on the first", i, res, m.connections())
		}
	}
	res := p.Probe(t.Context(), tg)
	if res.Code != 200 || m.connections() != 2 || p.Stats().Redials != 0 {
		t.Fatalf("after two timeouts: %+v on %d connections, want 200 on a second one, no redial", res, m.connections())
	}
}

// TestTCPKeepAlive: every dialed connection sends TCP keepalives as the
// docs say (keepAlive: after 15 s idle, every 15 s, 9 probes).
func TestTCPKeepAlive(t *testing.T) {
	m := newMutePeer(t, nil)
	p := newProber(t, Config{})
	conn, _, err := p.streams.get(t.Context(), streamKey{transport: tcp, addr: m.addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := conn.raw.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	_ = rc.Control(func(fd uintptr) {
		got["SO_KEEPALIVE"], _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		got["TCP_KEEPIDLE"], _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		got["TCP_KEEPINTVL"], _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL)
		got["TCP_KEEPCNT"], _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT)
	})
	want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 15, "TCP_KEEPINTVL": 15, "TCP_KEEPCNT": 9}
	if !maps.Equal(got, want) {
		t.Errorf("keepalive options %v, want %v", got, want)
	}
}
