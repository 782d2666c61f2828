package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// FreePBX's outbound routes in a real Asterisk: testdata/freepbx's
// extensions.conf is a route shaped as FreePBX's (two trunks in order,
// each through macro-dialout-trunk and its predial hook), its
// extensions_custom.conf the README's hook. Each trunk, trunk-a and
// trunk-b, is a PJSIP endpoint whose peer is a trunkPeer of the test,
// which answers qualifyd's OPTIONS until told to drop them and answers
// every INVITE 486 Busy Here, so that the call ends on the first trunk
// that is dialled and the peers tell which one took it.

// trunkPeer is a SIP peer on loopback UDP: OPTIONS get 200 unless drop is
// set, INVITEs 486 and are counted.
type trunkPeer struct {
	addr    string
	drop    atomic.Bool
	mu      sync.Mutex
	invites map[string]bool // Call-IDs of the INVITEs received
}

func startTrunkPeer(t *testing.T) *trunkPeer {
	t.Helper()
	p := &trunkPeer{invites: map[string]bool{}}
	p.addr = serveUDP(t, p.answer)
	return p
}

// calls is how many calls (Call-IDs) the peer was offered.
func (p *trunkPeer) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.invites)
}

// answer is the response to one request, "" for none.
func (p *trunkPeer) answer(msg string) string {
	head, _, _ := strings.Cut(msg, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	method, _, _ := strings.Cut(lines[0], " ")
	var copied []string
	var callID string
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		if full, ok := compact[name]; ok {
			name = full
		}
		switch name {
		case "to":
			if !strings.Contains(l, ";tag=") {
				l += ";tag=peer"
			}
			copied = append(copied, l)
		case "via", "from", "call-id", "cseq":
			copied = append(copied, l)
		}
		if name == "call-id" {
			callID = strings.TrimSpace(value)
		}
	}
	switch {
	case method == "OPTIONS" && !p.drop.Load():
		return "SIP/2.0 200 OK\r\n" + strings.Join(copied, "\r\n") + "\r\nContent-Length: 0\r\n\r\n"
	case method == "INVITE":
		p.mu.Lock()
		p.invites[callID] = true
		p.mu.Unlock()
		return "SIP/2.0 486 Busy Here\r\n" + strings.Join(copied, "\r\n") + "\r\nContent-Length: 0\r\n\r\n"
	}
	return ""
}

// freePBX is a real Asterisk with the FreePBX-shaped route, its two
// trunks' peers and qualifyd's configuration.
type freePBX struct {
	ast   *peertest.Asterisk
	peers map[string]*trunkPeer
	conf  string
	calls int
}

// newFreePBX starts the peers and Asterisk, and writes qualifyd's file
// with sink (a type=sink section without its address and secret).
func newFreePBX(t *testing.T, sink string) *freePBX {
	t.Helper()
	f := &freePBX{ast: peertest.NewAsterisk(t), peers: map[string]*trunkPeer{}}
	pjsip := fmt.Sprintf("[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n", f.ast.SIPPort)
	var q strings.Builder
	for _, name := range []string{"trunk-a", "trunk-b"} {
		p := startTrunkPeer(t)
		f.peers[name] = p
		pjsip += fmt.Sprintf("[%[1]s]\ntype=endpoint\naors=%[1]s\ncontext=from-trunk\nallow=ulaw\n\n[%[1]s]\ntype=aor\ncontact=sip:%[2]s\nqualify_frequency=0\n\n", name, p.addr)
		fmt.Fprintf(&q, "[%[1]s]\ntype=aor\ncontact=sip:%[2]s\n%[3]s\n[%[1]s]\ntype=endpoint\naors=%[1]s\n\n", name, p.addr, astQualify)
	}
	f.ast.Write("pjsip.conf", pjsip)
	f.ast.Write("manager.conf", readmeManager(t, f.ast.AMIPort))
	for _, name := range []string{"extensions.conf", "extensions_custom.conf"} {
		b, err := os.ReadFile(filepath.Join("testdata", "freepbx", name))
		if err != nil {
			t.Fatal(err)
		}
		f.ast.Write(name, string(b))
	}
	f.ast.Start()
	t.Cleanup(func() {
		if log, err := os.ReadFile(filepath.Join(f.ast.Dir, "log", "messages")); t.Failed() && err == nil {
			t.Logf("asterisk's messages:\n%s", log)
		}
	})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ami.secret"), peertest.AMISecret+"\n")
	fmt.Fprintf(&q, "%saddress=127.0.0.1:%d\nusername=qualifyd\nsecret_file=ami.secret\nheartbeat_interval=1\nfailopen_after=%d\n",
		sink, f.ast.AMIPort, int(astFailOpenAfter.Seconds()))
	f.conf = filepath.Join(dir, "qualifyd.conf")
	writeFile(t, f.conf, q.String())
	return f
}

// call places a call to a fresh number through the route and returns
// what each trunk did (astdb's route/<number>-<trunk>: BYPASS or the
// Dial's DIALSTATUS, "" for a trunk the route never reached) once the
// route has ended.
func (f *freePBX) call(t *testing.T) (first, second string) {
	t.Helper()
	f.calls++
	number := fmt.Sprintf("555%04d", f.calls)
	if _, err := f.ast.CLI("channel originate Local/" + number + "@from-internal application Wait 1"); err != nil {
		t.Fatal(err)
	}
	get := func(trunk int) string {
		out, err := f.ast.CLI(fmt.Sprintf("database get route %s-%d", number, trunk))
		if value, ok := strings.CutPrefix(strings.TrimSpace(out), "Value: "); err == nil && ok {
			return strings.TrimSpace(value)
		}
		return ""
	}
	// The route records trunk 1 before it tries trunk 2: reading them in
	// the other order, two CLI calls apart, never sees trunk 2's record
	// without trunk 1's, however far the call moves between the reads.
	eventually(t, astBound, "the route's end for "+number, func() bool {
		second = get(2)
		first = get(1)
		return first == "BUSY" || second != ""
	})
	return first, second
}

// takes checks that a call goes to the trunk want alone, first and
// second being what the route did with each trunk.
func (f *freePBX) takes(t *testing.T, want, first, second string) {
	t.Helper()
	wantFirst, wantSecond := "BUSY", ""
	if want == "trunk-b" {
		wantFirst, wantSecond = first, "BUSY"
	}
	before := map[string]int{"trunk-a": f.peers["trunk-a"].calls(), "trunk-b": f.peers["trunk-b"].calls()}
	got1, got2 := f.call(t)
	if got1 != wantFirst || got2 != wantSecond {
		t.Fatalf("the route: trunk-a %q, trunk-b %q; want %q, %q", got1, got2, wantFirst, wantSecond)
	}
	for name, p := range f.peers {
		if took := p.calls() - before[name]; took != map[bool]int{true: 1, false: 0}[name == want] {
			t.Fatalf("%s was offered %d calls, want the call on %s alone", name, took, want)
		}
	}
}

// TestFreePBXMaintenanceNextTrunk: with method=maintenance, the route's
// first trunk takes calls while it is up; once qualifyd holds it down
// (in maintenance, its peer silent), Asterisk refuses the Dial and the
// route's next trunk takes the call, with no predial hook involved.
func TestFreePBXMaintenanceNextTrunk(t *testing.T) {
	f := newFreePBX(t, "[asterisk]\ntype=sink\ndriver=ami\nmethod=maintenance\n")
	d := startDaemon(t, "--config", f.conf, "--http", "", "--sip-bind", "127.0.0.1:0")
	d.expectEach("Endpoint trunk-a is now Reachable", "Endpoint trunk-b is now Reachable")
	f.takes(t, "trunk-a", "BUSY", "")
	f.peers["trunk-a"].drop.Store(true)
	d.expect("Endpoint trunk-a is now Unreachable")
	eventually(t, astBound, "trunk-a in maintenance", func() bool { return f.inMaintenance(t)["trunk-a"] })
	first, _ := f.call(t)
	t.Logf("maintenance: the route's Dial of trunk-a ended %s", first)
	if first == "BUSY" || first == "BYPASS" || first == "" {
		t.Fatalf("trunk-a in maintenance: the route's Dial ended %q", first)
	}
	f.takes(t, "trunk-b", first, "")
}

// inMaintenance returns the endpoints `pjsip show maintenance` lists.
func (f *freePBX) inMaintenance(t *testing.T) map[string]bool {
	return (&pbx{ast: f.ast}).inMaintenance(t)
}

// TestFreePBXPredialHookSkipsTrunk: with device states, the README's
// predial hook makes the route skip trunk-a while qualifyd holds
// Custom:trunk-a UNAVAILABLE (trunk-a is never offered the call, trunk-b
// takes it), routes trunk-a again once it is back, and fails open: with
// qualifyd killed and trunk-a still UNAVAILABLE, the route dials trunk-a
// again once failopen_after has passed.
func TestFreePBXPredialHookSkipsTrunk(t *testing.T) {
	f := newFreePBX(t, "[asterisk]\ntype=sink\ndriver=ami\n")
	d := startDaemon(t, "--config", f.conf, "--http", "", "--sip-bind", "127.0.0.1:0")
	d.expectEach("Endpoint trunk-a is now Reachable", "Endpoint trunk-b is now Reachable")
	p := &pbx{ast: f.ast}
	custom := func(name string) string {
		out, err := p.ast.CLI("database get CustomDevstate " + name)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value: "))
	}
	eventually(t, astBound, "Custom:trunk-a NOT_INUSE", func() bool { return custom("trunk-a") == "NOT_INUSE" })
	f.takes(t, "trunk-a", "BUSY", "")

	f.peers["trunk-a"].drop.Store(true)
	d.expect("Endpoint trunk-a is now Unreachable")
	eventually(t, astBound, "Custom:trunk-a UNAVAILABLE", func() bool { return custom("trunk-a") == "UNAVAILABLE" })
	f.takes(t, "trunk-b", "BYPASS", "")

	f.peers["trunk-a"].drop.Store(false)
	d.expect("Endpoint trunk-a is now Reachable")
	eventually(t, astBound, "Custom:trunk-a NOT_INUSE again", func() bool { return custom("trunk-a") == "NOT_INUSE" })
	f.takes(t, "trunk-a", "BUSY", "")

	f.peers["trunk-a"].drop.Store(true)
	d.expect("Endpoint trunk-a is now Unreachable")
	eventually(t, astBound, "Custom:trunk-a UNAVAILABLE again", func() bool { return custom("trunk-a") == "UNAVAILABLE" })
	f.takes(t, "trunk-b", "BYPASS", "")
	killed := kill(t, d)
	eventually(t, astBound, "the hook failing open", func() bool {
		first, _ := f.call(t)
		return first == "BUSY"
	})
	took := time.Since(killed)
	t.Logf("the predial hook failed open %v after kill -9 (failopen_after %v, heartbeat 1 s)", took.Round(10*time.Millisecond), astFailOpenAfter)
	if took > astFailOpenBound {
		t.Fatalf("the hook failed open %v after the kill, want within %v", took, astFailOpenBound)
	}
	if custom("trunk-a") != "UNAVAILABLE" {
		t.Fatal("Custom:trunk-a changed: the fail-open is the hook's, the state stays qualifyd's last")
	}
}

// TestREADMEFreePBXHook: docs/routers.md shows testdata/freepbx's
// extensions_custom.conf, the file the FreePBX tests run, as it is.
func TestREADMEFreePBXHook(t *testing.T) {
	readme := docText(t, "docs/routers.md")
	b, err := os.ReadFile(filepath.Join("testdata", "freepbx", "extensions_custom.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readme, "```\n"+string(b)+"```\n") {
		t.Error("docs/routers.md does not show testdata/freepbx/extensions_custom.conf as it is")
	}
}
