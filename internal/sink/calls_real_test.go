package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// recorder is an observe.Sink that keeps what it is given.
type recorder struct {
	mu  sync.Mutex
	obs []observe.Observation
	at  []time.Time
}

func (r *recorder) Observe(batch []observe.Observation) observe.Tally {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, batch...)
	for range batch {
		r.at = append(r.at, time.Now())
	}
	return observe.Tally{Accepted: len(batch)}
}

func (r *recorder) taken() ([]observe.Observation, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Observation(nil), r.obs...), append([]time.Time(nil), r.at...)
}

// callPeer is a SIPp trunk on loopback playing scenario (testdata/calls
// or the Kamailio tests' trunk.xml), and its port.
func callPeer(t *testing.T, scenario string) int {
	t.Helper()
	port := peertest.FreePort(t, "udp")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	peertest.Start(t, "sipp", "-sf", scenario, "-i", "127.0.0.1", "-p", fmt.Sprint(port), "-t", "u1",
		"-nostdin", "-key", "contact", addr)
	return port
}

// TestAMICallsReal places calls through the real Asterisk's dial plan to
// SIPp trunks and holds the watcher to the outcome of each leg: a trunk
// that answers is Answered, one that answers 503 is Failed 503, one that
// never answers is a Timeout when Timer B fires (timer_t1=100 and
// timer_b=4000 in type=system: Asterisk raises Timer B to 64 x T1,
// 6.4 s, and says so), one whose TCP port refuses the connection is
// Failed 503 at once (pjsip's transport error), and a callee that rings
// until Dial's timeout cancels the leg is nothing at all. About 7 s.
func TestAMICallsReal(t *testing.T) {
	calls := filepath.Join("testdata", "calls")
	trunk, _ := filepath.Abs("../../cmd/qualifyd/testdata/kamailio/trunk.xml")
	peers := map[string]int{}
	for ep, scen := range map[string]string{"ok": trunk, "busy": filepath.Join(calls, "invite-503.xml"),
		"dead": filepath.Join(calls, "invite-silent.xml"), "ring": filepath.Join(calls, "invite-ring.xml")} {
		abs, _ := filepath.Abs(scen)
		peers[ep] = callPeer(t, abs)
	}
	a := peertest.NewAsterisk(t)
	a.Write("manager.conf", fmt.Sprintf("[general]\nenabled = yes\nport = %d\nbindaddr = 127.0.0.1\n\n"+
		"[qualifyd]\nsecret = %s\nread = call\nwrite = call,system\n", a.AMIPort, peertest.AMISecret))
	var pj strings.Builder
	fmt.Fprintf(&pj, "[system]\ntype=system\ntimer_t1=100\ntimer_b=4000\n\n[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n"+
		"\n[tcp]\ntype=transport\nprotocol=tcp\nbind=127.0.0.1:%d\n", a.SIPPort, peertest.FreePort(t, "tcp"))
	conf := &pjsip.Config{}
	on := &qualify.Policy{Frequency: 30 * time.Second}
	// refused: a TCP peer whose port is closed.
	refused := fmt.Sprintf("sip:refused@127.0.0.1:%d;transport=tcp", peertest.FreePort(t, "tcp"))
	fmt.Fprintf(&pj, "\n[refused]\ntype=endpoint\ncontext=in\ndisallow=all\nallow=ulaw\ntransport=tcp\naors=refused\n\n[refused]\ntype=aor\ncontact=%s\n", refused)
	conf.AoRs = append(conf.AoRs, pjsip.AoR{AoR: probe.AoR{Name: "refused", Contacts: []string{refused}, Policy: on}})
	conf.Endpoints = append(conf.Endpoints, pjsip.Endpoint{Name: "refused", AoRs: []string{"refused"}})
	for _, ep := range []string{"busy", "dead", "ok", "ring"} {
		contact := fmt.Sprintf("sip:%s@127.0.0.1:%d", ep, peers[ep])
		fmt.Fprintf(&pj, "\n[%s]\ntype=endpoint\ncontext=in\ndisallow=all\nallow=ulaw\naors=%s\n\n[%s]\ntype=aor\ncontact=%s\n", ep, ep, ep, contact)
		conf.AoRs = append(conf.AoRs, pjsip.AoR{AoR: probe.AoR{Name: ep, Contacts: []string{contact}, Policy: on}})
		conf.Endpoints = append(conf.Endpoints, pjsip.Endpoint{Name: ep, AoRs: []string{ep}})
	}
	a.Write("pjsip.conf", pj.String())
	a.Write("extensions.conf", "[out]\nexten => ring,1,Dial(PJSIP/ring,2)\nexten => _[a-z].,1,Dial(PJSIP/${EXTEN},30)\n[in]\n")
	a.Start()

	rec := &recorder{}
	def := &pjsip.Sink{Name: "asterisk", Driver: "ami", Address: fmt.Sprintf("127.0.0.1:%d", a.AMIPort),
		Username: "qualifyd", Secret: peertest.AMISecret, Auth: "md5", Timeout: 5 * time.Second}
	c := NewCalls(def, conf, rec, nil, nil)
	go c.Run(t.Context())
	waitFor(t, "the watcher's login", func() bool { return c.Stats().Up })

	start := time.Now()
	for _, ep := range []string{"ok", "busy", "dead", "ring", "refused"} {
		if out, err := a.CLI("channel originate Local/" + ep + "@out application Wait 1"); err != nil {
			t.Fatalf("originate: %v %s", err, out)
		}
	}
	waitFor(t, "four observations and every leg ended", func() bool {
		got, _ := rec.taken()
		return len(got) >= 4 && c.Stats().Legs.Events > 0 && func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.legs.Len() == 0 }()
	})
	got, at := rec.taken()
	want := map[string]observe.Observation{
		"ok":   {AoR: "ok", Outcome: observe.Answered, Source: observe.SourceAMI},
		"busy": {AoR: "busy", Outcome: observe.Failed, Code: 503, Source: observe.SourceAMI},
		"dead": {AoR: "dead", Outcome: observe.Timeout, Source: observe.SourceAMI},
		// pjsip reports the refused connection as 503 (PJSIP_SC_TSX_TRANSPORT_ERROR).
		"refused": {AoR: "refused", Outcome: observe.Failed, Code: 503, Source: observe.SourceAMI},
	}
	if len(got) != len(want) {
		t.Fatalf("observations %+v, want one each of %v", got, want)
	}
	for i, o := range got {
		o.Time = time.Time{}
		if want[o.AoR] != o {
			t.Errorf("observation %+v, want %+v", o, want[o.AoR])
		}
		t.Logf("%s: %v %d after %v", o.AoR, o.Outcome, o.Code, at[i].Sub(start).Round(10*time.Millisecond))
	}
	if !strings.Contains(a.Log.String()+readLog(t, a), "Timer B setting is too low. Setting to 6400") {
		t.Errorf("Asterisk did not say it raised timer_b=4000 to 64 x timer_t1")
	}
	if s := c.Stats(); s.Legs.Dropped != 0 || s.Taken.Accepted != 4 {
		t.Errorf("stats %+v", s)
	}
}

// waitFor polls cond every 20 ms until it holds; the test fails if it
// does not within 20 s (a bound that only stops a broken run).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		<-tick.C
	}
}

// readLog returns Asterisk's messages log.
func readLog(t *testing.T, a *peertest.Asterisk) string {
	b, err := os.ReadFile(filepath.Join(a.Dir, "log", "messages"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
