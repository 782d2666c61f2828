package sipprobe

import (
	"crypto/tls"
	"net"
	"sync"
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

// TestTCPSilentPeerIsRedialed: two timeouts in a row on a connection
// that received nothing in between close it; the next probe dials a new
// one and is answered on it. Over TCP and TLS alike.
func TestTCPSilentPeerIsRedialed(t *testing.T) {
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
	tg := target(uri, 300*time.Millisecond)
	if res := p.Probe(t.Context(), tg); res.Code != 200 {
		t.Fatalf("first probe: %+v", res)
	}
	m.silence()
	for i := range 2 {
		if res := p.Probe(t.Context(), tg); res.Reason != qualify.ReasonTimeout {
			t.Fatalf("silent probe %d: %+v, want a timeout", i, res)
		}
		if n := m.connections(); n != 1 {
			t.Fatalf("after silent probe %d: %d connections, want still 1", i, n)
		}
	}
	res := p.Probe(t.Context(), tg)
	if res.Code != 200 || m.connections() != 2 {
		t.Fatalf("after two timeouts: %+v on %d connections, want 200 on a second one", res, m.connections())
	}
}

// TestTCPTimeoutsWithAnswersBetweenKeepTheConnection: a timeout, an
// answer, a timeout: bytes came between the two, so the connection stays.
func TestTCPTimeoutsWithAnswersBetweenKeepTheConnection(t *testing.T) {
	m := newMutePeer(t, nil)
	p := newProber(t, Config{})
	ignored := target("sip:ignore@"+m.addr.String()+";transport=tcp", 300*time.Millisecond)
	answered := target(uriOf(m.responder, ";transport=tcp"), 300*time.Millisecond)
	for i := range 3 {
		if res := p.Probe(t.Context(), ignored); res.Reason != qualify.ReasonTimeout {
			t.Fatalf("ignored probe %d: %+v", i, res)
		}
		if res := p.Probe(t.Context(), answered); res.Code != 200 {
			t.Fatalf("answered probe %d: %+v", i, res)
		}
	}
	if n := m.connections(); n != 1 {
		t.Fatalf("%d connections, want 1: an answer between two timeouts keeps the connection", n)
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
