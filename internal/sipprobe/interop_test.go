package sipprobe

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Interop tests against real SIP peers started on loopback: SIPp (Debian
// package sip-tester) and Kamailio. `make test` installs both; a missing
// peer fails the test rather than skipping it, so that an interop test
// never passes unrun.

// The peers' helpers, shared with the other interop tests.
var (
	requirePeer = peertest.Require
	freePort    = peertest.FreePort
)

// startPeer runs a peer process until the test ends (see peertest.Start).
func startPeer(t *testing.T, name string, args ...string) { peertest.Start(t, name, args...) }

// waitTCP waits until addr accepts connections (the peer has started);
// UDP needs no wait, since the probe's own retransmissions cover startup.
func waitTCP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer at %s did not start: %v", addr, err)
		}
		<-tick.C
	}
}

// startSIPp runs a SIPp UAS scenario on 127.0.0.1 over udp or tcp and
// returns its contact URI.
func startSIPp(t *testing.T, scenario, transport string, extra ...string) string {
	t.Helper()
	port := freePort(t, transport)
	mode := map[string]string{"udp": "u1", "tcp": "t1"}[transport]
	sf, _ := filepath.Abs(filepath.Join("testdata", "sipp", scenario))
	args := append([]string{"-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(port), "-t", mode,
		"-nostdin", "-deadcall_wait", "0", "-timeout_error", "-max_recv_loops", "1000"}, extra...)
	startPeer(t, "sipp", args...)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if transport == "tcp" {
		waitTCP(t, addr)
	}
	return fmt.Sprintf("sip:sipp@%s;transport=%s", addr, transport)
}

func TestInteropSIPp(t *testing.T) {
	for _, tr := range []string{"udp", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			p := newProber(t, Config{})
			t.Run("200", func(t *testing.T) {
				res := p.Probe(t.Context(), target(startSIPp(t, "options-200.xml", tr), 5*time.Second))
				if res.Code != 200 || res.Reason != qualify.ReasonNone || res.RTT <= 0 {
					t.Fatalf("got %+v, want 200", res)
				}
			})
			t.Run("503", func(t *testing.T) {
				res := p.Probe(t.Context(), target(startSIPp(t, "options-503.xml", tr), 5*time.Second))
				if res.Code != 503 || res.Reason != qualify.ReasonNone {
					t.Fatalf("got %+v, want 503", res)
				}
			})
			t.Run("delayed", func(t *testing.T) { sippDelayed(t, p, tr) })
			t.Run("silent", func(t *testing.T) {
				res := p.Probe(t.Context(), target(startSIPp(t, "options-silent.xml", tr), 500*time.Millisecond))
				if res.Reason != qualify.ReasonTimeout {
					t.Fatalf("got %+v, want timeout", res)
				}
			})
		})
	}
}

// sippDelayed: SIPp answers 1.2 s after the request, so over UDP the
// request was retransmitted (T1 = 500 ms) and SIPp absorbed the copy; the
// RTT includes the delay.
func sippDelayed(t *testing.T, p *Prober, tr string) {
	before := p.Stats().Retransmissions
	res := p.Probe(t.Context(), target(startSIPp(t, "options-delay.xml", tr, "-d", "1200"), 5*time.Second))
	if res.Code != 200 || res.RTT < 1200*time.Millisecond {
		t.Fatalf("got %+v, want 200 after at least 1.2 s", res)
	}
	retrans := p.Stats().Retransmissions - before
	if (tr == "udp") != (retrans > 0) {
		t.Errorf("%s: %d retransmissions", tr, retrans)
	}
}

// startKamailio runs Kamailio's stateless OPTIONS responder with UDP and
// TCP listeners and returns their ports.
func startKamailio(t *testing.T) (udpPort, tcpPort int) {
	t.Helper()
	dir := t.TempDir()
	udpPort, tcpPort = freePort(t, "udp"), freePort(t, "tcp")
	cfg, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "responder.cfg"))
	startPeer(t, "kamailio", "-f", cfg, "-DD", "-E", "-m", "32", "-M", "8", "-Y", dir, "-P", filepath.Join(dir, "pid"),
		"-A", fmt.Sprintf("LISTEN=udp:127.0.0.1:%d", udpPort), "-A", fmt.Sprintf("LISTEN_TCP=tcp:127.0.0.1:%d", tcpPort),
		"-A", "WITH_TCP", "-A", fmt.Sprintf(`CTLSOCK="unix:%s"`, filepath.Join(dir, "ctl")))
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", tcpPort))
	return udpPort, tcpPort
}

func TestInteropKamailio(t *testing.T) {
	udpPort, tcpPort := startKamailio(t)
	p := newProber(t, Config{})
	for _, uri := range []string{
		fmt.Sprintf("sip:kam@127.0.0.1:%d", udpPort),
		fmt.Sprintf("sip:kam@127.0.0.1:%d;transport=tcp", tcpPort),
	} {
		res := p.Probe(t.Context(), target(uri, 5*time.Second))
		if res.Code != 200 || res.Reason != qualify.ReasonNone {
			t.Errorf("%s: got %+v, want 200", uri, res)
		}
	}
	if s := p.Stats(); s.Matched != 2 || s.DroppedMalformed != 0 {
		t.Errorf("stats %+v", s)
	}
}
