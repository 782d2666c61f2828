package main

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// guardedPeer is a SIP peer on loopback behind a flood guard, as a
// Fritzbox's or Kamailio's pike: a datagram that arrives while more than
// limit datagrams of its source (ignored ones included, retransmissions
// too) arrived within window is ignored. Outside an outage, what the
// guard lets through is answered.
type guardedPeer struct {
	r      *responder.Responder
	limit  int
	window time.Duration

	mu      sync.Mutex
	arrived []time.Time
	outage  bool
	ignored int // datagrams the guard ignored outside an outage
}

// newGuardedPeer starts a peer whose guard lets through 5 datagrams in 4 s.
func newGuardedPeer(t *testing.T) *guardedPeer {
	t.Helper()
	g := &guardedPeer{limit: 5, window: 4 * time.Second}
	r, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action { return responder.Action{Drop: !g.admit()} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	g.r = r
	return g
}

// admit counts one datagram and reports whether the peer answers it.
func (g *guardedPeer) admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	g.arrived = append(g.arrived, now)
	n := 0
	for _, a := range g.arrived {
		if now.Sub(a) < g.window {
			n++
		}
	}
	switch {
	case g.outage:
		return false
	case n > g.limit:
		g.ignored++
		return false
	}
	return true
}

// setOutage starts or ends an outage: nothing is answered meanwhile.
func (g *guardedPeer) setOutage(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.outage = on
}

// ignoredCount returns how many datagrams the guard ignored outside the
// outage.
func (g *guardedPeer) ignoredCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ignored
}

// TestFloodGuardedPeerRecovers is the down backoff against real sockets
// (qualify-semantics §7): two trunks behind flood guards (5 datagrams in
// 4 s) go silent until qualifyd makes them Unreachable; over UDP each lost
// OPTIONS reaches the guard three times within T = 1.6 s, so the failing
// streak has tripped both guards when the peers answer again. The one on
// the backoff (R = 0.5 s, doubling up to F = 4 s) is Reachable again once
// its guard forgets; the one with qualify_down_interval=R, probed every
// T + R = 2.1 s, keeps its guard tripped and stays Unreachable.
func TestFloodGuardedPeerRecovers(t *testing.T) {
	t.Parallel()
	backoff, fixed := newGuardedPeer(t), newGuardedPeer(t)
	policy := "qualify_frequency=4\nqualify_timeout=1.6\nqualify_failures=2\nqualify_retry_interval=0.5\n"
	uri := func(name string, g *guardedPeer) string { return "sip:" + name + "@" + g.r.Addr().String() }
	conf := filepath.Join(t.TempDir(), "pjsip.conf")
	writeFile(t, conf, "[backoff]\ntype=aor\ncontact="+uri("backoff", backoff)+"\n"+policy+"\n"+
		"[fixed]\ntype=aor\ncontact="+uri("fixed", fixed)+"\n"+policy+"qualify_down_interval=0.5\n")
	qd := qualifydOn(t, conf)
	for name, g := range map[string]*guardedPeer{"backoff": backoff, "fixed": fixed} {
		qd.awaitLine(t, name, fmt.Sprintf("Contact %s/%s is now Reachable", name, uri(name, g)), 1)
	}
	backoff.setOutage(true)
	fixed.setOutage(true)
	for name, g := range map[string]*guardedPeer{"backoff": backoff, "fixed": fixed} {
		qd.awaitLine(t, name, fmt.Sprintf("Contact %s/%s is now Unreachable", name, uri(name, g)), 1)
	}
	backoff.setOutage(false)
	fixed.setOutage(false)
	mended := time.Now()
	back := qd.awaitLine(t, "backoff", fmt.Sprintf("Contact backoff/%s is now Reachable", uri("backoff", backoff)), 2)
	t.Logf("backoff: Reachable %v after the outage; its guard ignored %d datagrams", back.at.Sub(mended), backoff.ignoredCount())
	// The fixed interval's guard never forgets: once it has ignored
	// three whole OPTIONS (nine datagrams) after the outage, the contact
	// is still Unreachable.
	eventually(t, qualifyBound, "fixed: nine datagrams ignored after the outage", func() bool { return fixed.ignoredCount() >= 9 })
	for _, l := range qd.aorLines("fixed") {
		if l.at.After(mended) && strings.HasPrefix(l.text, fmt.Sprintf("Contact fixed/%s is now Reachable", uri("fixed", fixed))) {
			t.Fatalf("fixed: Reachable at %v; its guard should hold it", l.at.Sub(mended))
		}
	}
	t.Logf("fixed: still Unreachable %v after the outage, its guard ignored %d datagrams", time.Since(mended), fixed.ignoredCount())
}
