package main

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// Routing follows qualifyd in a real Asterisk (peertest.NewAsterisk), run
// with the README's manager.conf and extensions.conf: the
// trunk pbx07 is a PJSIP endpoint whose peer is a responder of the test,
// which answers qualifyd's OPTIONS until the test makes it drop them.
// qualifyd qualifies it every second, one lost probe taking it down, and
// its ami sink beats every second with a 3 s fail-open window, so that
// each fault shows within seconds. Waits poll Asterisk (its CLI) with a
// bound that only stops a broken run; the bound with a meaning is the
// issue's: fail open within failopen_after + 10 s.

const (
	astQualify       = "qualify_frequency=1\nqualify_timeout=0.3\nqualify_failures=1\n"
	astFailOpenAfter = 3 * time.Second
	// astFailOpenBound is when a fail-open must have happened after
	// qualifyd is killed.
	astFailOpenBound = astFailOpenAfter + 10*time.Second
	// astBound is the bound of the waits on Asterisk: it only stops a
	// broken run.
	astBound = 30 * time.Second
)

// pbx is a real Asterisk with the trunk pbx07, its peer, and qualifyd's
// configuration.
type pbx struct {
	ast  *peertest.Asterisk
	drop *atomic.Bool // the peer drops OPTIONS
	conf string       // qualifyd's configuration file
	runs int          // routine runs, for fresh astdb keys
}

// newPBX starts the trunk's peer and Asterisk with the README's
// extensions.conf (and a context that runs its routine), and writes
// qualifyd's configuration with the sinks given (type=sink sections
// without their address and secret, which newPBX adds).
func newPBX(t *testing.T, sinks ...string) *pbx {
	t.Helper()
	p := &pbx{drop: &atomic.Bool{}}
	peer, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action {
		return responder.Action{Drop: p.drop.Load()}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	contact := "sip:pbx07@" + peer.Addr().String()
	p.ast = peertest.NewAsterisk(t)
	p.ast.Write("pjsip.conf", fmt.Sprintf("[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n"+
		"[pbx07]\ntype=endpoint\naors=pbx07\ncontext=from-pbx07\n\n[pbx07]\ntype=aor\ncontact=%s\nqualify_frequency=0\n",
		p.ast.SIPPort, contact))
	readme, err := os.ReadFile(filepath.Join("testdata", "sinks", "extensions.conf"))
	if err != nil {
		t.Fatal(err)
	}
	p.ast.Write("manager.conf", readmeManager(t, p.ast.AMIPort))
	p.ast.Write("extensions.conf", string(readme)+"\n[qualifyd-e2e]\n"+
		"exten => _r.,1,GoSub(qualifyd-trunk,s,1(pbx07))\n same => n,Set(DB(e2e/${EXTEN:1})=${GOSUB_RETVAL})\n same => n,Hangup()\n")
	p.ast.Start()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ami.secret"), peertest.AMISecret+"\n")
	var c strings.Builder
	fmt.Fprintf(&c, "[pbx07]\ntype=aor\ncontact=%s\n%s\n[pbx07]\ntype=endpoint\naors=pbx07\n\n", contact, astQualify)
	for _, s := range sinks {
		fmt.Fprintf(&c, "%saddress=127.0.0.1:%d\nusername=qualifyd\nsecret_file=ami.secret\nheartbeat_interval=1\nfailopen_after=%d\n\n",
			s, p.ast.AMIPort, int(astFailOpenAfter/time.Second))
	}
	p.conf = filepath.Join(dir, "qualifyd.conf")
	writeFile(t, p.conf, c.String())
	return p
}

// readmeManager is the README's manager.conf on port, with the test's
// secret: the Manager user qualifyd and its guard log in as.
func readmeManager(t *testing.T, port int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sinks", "manager.conf"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "port = 5038", fmt.Sprintf("port = %d", port), 1)
	s = strings.Replace(s, "secret = the same as /etc/qualifyd/ami.secret", "secret = "+peertest.AMISecret, 1)
	if s == string(b) || strings.Contains(s, "5038") || strings.Contains(s, "the same as") {
		t.Fatalf("the README's manager.conf changed shape:\n%s", b)
	}
	return s
}

// qualifyd starts `qualifyd run` on the PBX's configuration.
func (p *pbx) qualifyd(t *testing.T) *daemonProc {
	d := startDaemon(t, "--config", p.conf, "--http", "", "--sip-bind", "127.0.0.1:0")
	d.expect("qualifyd: started")
	return d
}

// trunkDown starts qualifyd, waits for pbx07 Reachable, then makes its
// peer drop every OPTIONS and waits for qualifyd's Unreachable.
func (p *pbx) trunkDown(t *testing.T) *daemonProc {
	t.Helper()
	d := p.qualifyd(t)
	d.expect("Endpoint pbx07 is now Reachable")
	p.drop.Store(true)
	d.expect("Endpoint pbx07 is now Unreachable")
	return d
}

// routine runs the README's GoSub(qualifyd-trunk,s,1(pbx07)) in Asterisk
// (a Local channel into the test's context, which writes GOSUB_RETVAL to
// astdb) and returns what it returned.
func (p *pbx) routine(t *testing.T) string {
	t.Helper()
	p.runs++
	if _, err := p.ast.CLI(fmt.Sprintf("channel originate Local/r%d@qualifyd-e2e application Wait 1", p.runs)); err != nil {
		t.Fatal(err)
	}
	var got string
	eventually(t, astBound, "the routine's result in astdb", func() bool {
		out, err := p.ast.CLI(fmt.Sprintf("database get e2e %d", p.runs))
		got = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value: "))
		return err == nil && (got == "0" || got == "1")
	})
	return got
}

// inMaintenance returns the endpoints `pjsip show maintenance` lists.
func (p *pbx) inMaintenance(t *testing.T) map[string]bool {
	t.Helper()
	out, err := p.ast.CLI("pjsip show maintenance")
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[1] != "State" && !strings.HasPrefix(f[0], "---") {
			in[f[0]] = true
		}
	}
	return in
}

// kill kills qualifyd with SIGKILL and returns when.
func kill(t *testing.T, d *daemonProc) time.Time {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	_ = d.cmd.Wait()
	return at
}

// TestAsteriskDevstateFailsOpen: the trunk's peer stops answering ->
// Custom:pbx07 UNAVAILABLE in Asterisk and the README's routine returns
// 1 (take the backup); qualifyd killed -> the routine returns 0 (route
// the trunk) once failopen_after has passed, within failopen_after + 10 s.
func TestAsteriskDevstateFailsOpen(t *testing.T) {
	p := newPBX(t, "[asterisk]\ntype=sink\ndriver=ami\n")
	d := p.qualifyd(t)
	d.expect("Endpoint pbx07 is now Reachable")
	eventually(t, astBound, "Custom:pbx07 NOT_INUSE", func() bool { return p.devstate(t) == "NOT_INUSE" })
	if got := p.routine(t); got != "0" {
		t.Fatalf("routine %s with the trunk up", got)
	}
	p.drop.Store(true)
	d.expect("Endpoint pbx07 is now Unreachable")
	eventually(t, astBound, "Custom:pbx07 UNAVAILABLE", func() bool { return p.devstate(t) == "UNAVAILABLE" })
	if got := p.routine(t); got != "1" {
		t.Fatalf("routine %s with the trunk down and qualifyd alive", got)
	}
	killed := kill(t, d)
	if got := p.routine(t); got != "1" {
		t.Fatalf("routine %s right after the kill: the window has not passed", got)
	}
	eventually(t, astBound, "fail-open", func() bool { return p.routine(t) == "0" })
	took := time.Since(killed)
	t.Logf("devstate: the routine failed open %v after kill -9 (failopen_after %v, heartbeat 1 s)", took.Round(10*time.Millisecond), astFailOpenAfter)
	if took > astFailOpenBound {
		t.Fatalf("the routine failed open %v after the kill, want within %v", took, astFailOpenBound)
	}
	if got := p.devstate(t); got != "UNAVAILABLE" {
		t.Fatalf("Custom:pbx07 %s: the fail-open is the routine's, the state stays qualifyd's last", got)
	}
}

// devstate returns Custom:pbx07's state in Asterisk.
func (p *pbx) devstate(t *testing.T) string {
	t.Helper()
	out, err := p.ast.CLI("database get CustomDevstate pbx07")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value: "))
}

// startGuard runs `qualifyd guard` on the PBX's configuration, checking
// every second.
func (p *pbx) startGuard(t *testing.T) *daemonProc {
	cmd := exec.Command(binary, "guard", "--config", p.conf, "--interval", "1s")
	return startProc(t, cmd)
}

// TestAsteriskMaintenanceFailsOpen: the trunk's peer stops answering ->
// pbx07 in maintenance; qualifyd killed -> `qualifyd guard` takes it out
// within failopen_after + 10 s and logs it; qualifyd back -> maintenance
// on again.
func TestAsteriskMaintenanceFailsOpen(t *testing.T) {
	p := newPBX(t, "[asterisk]\ntype=sink\ndriver=ami\nmethod=maintenance\n")
	g := p.startGuard(t)
	g.expect("guard: sink asterisk: guarding 127.0.0.1:")
	d := p.trunkDown(t)
	eventually(t, astBound, "pbx07 in maintenance", func() bool { return p.inMaintenance(t)["pbx07"] })
	killed := kill(t, d)
	eventually(t, astBound, "pbx07 out of maintenance", func() bool { return !p.inMaintenance(t)["pbx07"] })
	took := time.Since(killed)
	t.Logf("maintenance: the guard released pbx07 %v after kill -9 (failopen_after %v, heartbeat 1 s, guard every 1 s)", took.Round(10*time.Millisecond), astFailOpenAfter)
	if took > astFailOpenBound {
		t.Fatalf("released %v after the kill, want within %v", took, astFailOpenBound)
	}
	g.expect("passed")
	if l := g.seen[len(g.seen)-1]; !strings.Contains(l, "guard: sink asterisk: the heartbeat is stale: failopen_at ") ||
		!strings.HasSuffix(l, "maintenance off for 1 endpoint: pbx07") {
		t.Fatalf("guard line %q", l)
	}
	d = p.qualifyd(t)
	eventually(t, astBound, "pbx07 in maintenance again", func() bool { return p.inMaintenance(t)["pbx07"] })
	g.expect("guard: sink asterisk: the heartbeat is fresh again: qualifyd steers maintenance")
}

// TestAsteriskRestartReasserts: Asterisk restarted while qualifyd runs,
// with pbx07 down -> Custom:pbx07 is still UNAVAILABLE (astdb) and the
// routine returns 1 once the heartbeat is fresh; the maintenance
// Asterisk lost is asserted again when the sink reconnects.
func TestAsteriskRestartReasserts(t *testing.T) {
	p := newPBX(t, "[dev]\ntype=sink\ndriver=ami\n", "[maint]\ntype=sink\ndriver=ami\nmethod=maintenance\n")
	d := p.trunkDown(t)
	eventually(t, astBound, "pbx07 down in Asterisk", func() bool { return p.devstate(t) == "UNAVAILABLE" && p.inMaintenance(t)["pbx07"] })
	p.ast.Stop()
	p.ast.Start()
	restarted := time.Now()
	if got := p.devstate(t); got != "UNAVAILABLE" {
		t.Fatalf("Custom:pbx07 %q after the restart: astdb keeps it", got)
	}
	eventually(t, astBound, "pbx07 in maintenance after the restart", func() bool { return p.inMaintenance(t)["pbx07"] })
	d.expect("sink maint: connected")
	if got := p.routine(t); got != "1" {
		t.Fatalf("routine %s after the restart, with qualifyd alive", got)
	}
	t.Logf("maintenance re-asserted %v after Asterisk was back", time.Since(restarted).Round(10*time.Millisecond))
}

// TestAsteriskStalledQualifydFailsOpen: qualifyd stopped (SIGSTOP, as a
// hung process or one whose host is cut off from the Manager: no beat
// reaches astdb) with pbx07 down -> the routine returns 0 and the guard
// takes pbx07 out of maintenance; qualifyd resumed (SIGCONT) -> its next
// beat makes the routine return 1 again, and the sink reads the
// maintenance set back and puts pbx07 in maintenance again.
func TestAsteriskStalledQualifydFailsOpen(t *testing.T) {
	p := newPBX(t, "[dev]\ntype=sink\ndriver=ami\n", "[maint]\ntype=sink\ndriver=ami\nmethod=maintenance\n")
	g := p.startGuard(t)
	g.expect("guard: sink maint: guarding 127.0.0.1:")
	d := p.trunkDown(t)
	eventually(t, astBound, "pbx07 down in Asterisk", func() bool { return p.devstate(t) == "UNAVAILABLE" && p.inMaintenance(t)["pbx07"] })
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, astBound, "fail-open of both sinks", func() bool { return !p.inMaintenance(t)["pbx07"] && p.routine(t) == "0" })
	took := time.Since(stopped)
	t.Logf("both sinks failed open %v after SIGSTOP (failopen_after %v, heartbeat 1 s, guard every 1 s)", took.Round(10*time.Millisecond), astFailOpenAfter)
	if took > astFailOpenBound {
		t.Fatalf("failed open %v after the stall, want within %v", took, astFailOpenBound)
	}
	if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, astBound, "qualifyd's verdict back in Asterisk", func() bool { return p.inMaintenance(t)["pbx07"] && p.routine(t) == "1" })
	g.expect("guard: sink maint: the heartbeat is fresh again")
}

// TestAsteriskGuardDeadThenBack: without a running guard, a killed
// qualifyd leaves pbx07 in maintenance past its heartbeat's deadline
// (Asterisk has no expiry of its own); a guard that starts then releases
// it in its first round.
func TestAsteriskGuardDeadThenBack(t *testing.T) {
	p := newPBX(t, "[asterisk]\ntype=sink\ndriver=ami\nmethod=maintenance\n")
	d := p.trunkDown(t)
	eventually(t, astBound, "pbx07 in maintenance", func() bool { return p.inMaintenance(t)["pbx07"] })
	kill(t, d)
	eventually(t, astBound, "a stale heartbeat", func() bool {
		out, err := p.ast.CLI("database get qualifyd failopen_at")
		until, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value: ")), 10, 64)
		return err == nil && perr == nil && time.Now().Unix() > until
	})
	if !p.inMaintenance(t)["pbx07"] {
		t.Fatal("pbx07 left maintenance without a guard: the test shows nothing")
	}
	started := time.Now()
	g := p.startGuard(t)
	g.expect("maintenance off for 1 endpoint: pbx07")
	eventually(t, astBound, "pbx07 out of maintenance", func() bool { return !p.inMaintenance(t)["pbx07"] })
	t.Logf("a guard started on a stale heartbeat released pbx07 in %v", time.Since(started).Round(10*time.Millisecond))
}

// TestAsteriskReleasePipelines: `qualifyd release` of an ami sink of 301
// devices against the real Asterisk, whose Manager gets the Setvars a
// window at a time: every reply is matched and every device ends
// NOT_INUSE in astdb (CustomDevstate).
func TestAsteriskReleasePipelines(t *testing.T) {
	p := newPBX(t, "[asterisk]\ntype=sink\ndriver=ami\n")
	var extra strings.Builder
	for i := range 300 {
		fmt.Fprintf(&extra, "[t%03d]\ntype=aor\ncontact=sip:t%03d@127.0.0.1:9\nqualify_frequency=60\n", i, i)
	}
	conf, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p.conf, string(conf)+extra.String())
	var stdout, stderr strings.Builder
	start := time.Now()
	if code := run(t.Context(), []string{"release", "--config", p.conf}, &stdout, &stderr); code != 0 ||
		stdout.String() != "sink asterisk (ami): released 301 of 301 objects\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	t.Logf("released 301 devices in %v", time.Since(start).Round(time.Millisecond))
	out, err := p.ast.CLI("database show CustomDevstate")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, ": NOT_INUSE"); n != 301 || strings.Contains(out, "UNAVAILABLE") {
		t.Fatalf("%d devices NOT_INUSE, want 301:\n%s", n, out)
	}
}
