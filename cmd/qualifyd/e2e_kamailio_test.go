package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/state"
)

// Routing follows qualifyd: Kamailio's dispatcher (set 1 = trunks A and
// B, A first, failover to the next) routes calls, qualifyd probes the
// trunks and its kamailio sink sets them active or inactive over
// JSON-RPC. Kamailio never probes (ds_ping_interval=0), so every state
// change in dispatcher.list is qualifyd's (or the test's own, by hand).
//
// The trunks are SIPp processes, each behind a relay in the test that is
// its public address: the relay loses exactly one probe, or all traffic
// ("A stopped"), and counts the INVITEs that reach the trunk even when it
// is down. Waits poll the external processes with a bound that only stops
// a broken run; the one timed bound with a meaning is the sink's
// resync_interval.

// Probe settings of the trunks (qualify-semantics §2): a probe a second,
// three lost in a row take a trunk down.
const (
	trunkQualify   = "qualify_frequency=1\nqualify_timeout=0.5\nqualify_failures=3\nqualify_retry_interval=0.5\n"
	resyncInterval = 2 * time.Second
)

// routing is Kamailio routing over trunks A and B.
type routing struct {
	k    *kamailio
	a, b *trunk
	conf string // qualifyd's configuration file
}

// newRouting starts the trunks and Kamailio and writes qualifyd's
// configuration, with the kamailio sink if sink is set.
func newRouting(t *testing.T, sink bool) *routing {
	t.Helper()
	a, b := startTrunk(t, "trunk-a"), startTrunk(t, "trunk-b")
	r := &routing{k: startKamailio(t, a, b), a: a, b: b, conf: filepath.Join(t.TempDir(), "qualifyd.conf")}
	var c strings.Builder
	for _, tr := range []*trunk{a, b} {
		fmt.Fprintf(&c, "[%s]\ntype=aor\ncontact=%s\n%s\n", tr.name, tr.contact, trunkQualify)
	}
	if sink {
		fmt.Fprintf(&c, "[edge]\ntype=sink\ndriver=kamailio\nurl=%s\nresync_interval=%d\n", r.k.rpc, int(resyncInterval/time.Second))
	}
	writeFile(t, r.conf, c.String())
	return r
}

// qualifyd starts `qualifyd run` on the routing's configuration and waits
// for its "started" line, the last of d.seen.
func (r *routing) qualifyd(t *testing.T, extra ...string) *daemonProc {
	t.Helper()
	d := startDaemon(t, append([]string{"--config", r.conf, "--sip-bind", "127.0.0.1:0"}, extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			d.drain()
			t.Logf("qualifyd printed:\n%s", strings.Join(d.seen, "\n"))
		}
	})
	d.expect("qualifyd: started")
	return d
}

// upThroughOneLostProbe starts the peers and qualifyd (with the sink if
// sink is set) and runs the scenario's first two steps.
func upThroughOneLostProbe(t *testing.T, sink bool) (*routing, *daemonProc) {
	r := newRouting(t, sink)
	d := r.qualifyd(t, "--http", "")
	step(t, "1 both up", func() { r.bothUp(t, d) })
	step(t, "2 one lost probe leaves A active", func() { r.loseOneProbe(t, d) })
	return r, d
}

// step runs one step of a scenario on t's goroutine (the daemon and
// Kamailio helpers fail t itself), logging its name first so that a
// failure says which step it was in.
func step(t *testing.T, name string, fn func()) {
	t.Helper()
	t.Logf("step %s", name)
	fn()
}

// contactLine is the start of qualifyd's log lines about tr's contact
// (qualify-semantics §10).
func contactLine(tr *trunk) string { return "Contact " + tr.name + "/" + tr.contact + " " }

// bothUp waits until qualifyd finds both trunks Reachable, then checks
// that both are active and a call completes through A.
func (r *routing) bothUp(t *testing.T, d *daemonProc) {
	d.expectEach(contactLine(r.a)+"is now Reachable.", contactLine(r.b)+"is now Reachable.")
	for _, tr := range []*trunk{r.a, r.b} {
		if st := r.k.state(tr.dest); st != "A" {
			t.Fatalf("%s is %q in dispatcher.list, want A (active)", tr.dest, st)
		}
	}
	r.call(t, r.a, r.b, false)
}

// loseOneProbe makes trunk A miss exactly one probe and checks, over the
// next two answered probes, that qualifyd counted one failure and no more,
// and that A stayed active in Kamailio all along.
func (r *routing) loseOneProbe(t *testing.T, d *daemonProc) {
	s := r.k.watch(r.a.dest)
	mark := len(d.seen)
	r.a.relay.dropNextOptions()
	d.expect(contactLine(r.a) + "qualify failed (timeout): 1/3 failures, retrying in 0.5s")
	if r.a.relay.droppedCallID() == "" {
		t.Fatal("qualifyd logged a failure, but the relay dropped no probe")
	}
	answered := r.a.relay.counts().Answered
	eventually(t, peerBound, "two probes of A answered after the lost one", func() bool {
		return r.a.relay.counts().Answered >= answered+2
	})
	s.end(t, r.a.dest, "A")
	d.drain()
	for _, l := range d.seen[mark:] {
		if strings.Contains(l, contactLine(r.a)) && !strings.Contains(l, "1/3 failures") {
			t.Fatalf("one lost probe changed more than the failure count: %s", l)
		}
	}
}

// call places one call through Kamailio and checks that want answered it
// at Kamailio's first attempt and other got no INVITE; with failover, the
// call must have tried other first and failed over to want.
func (r *routing) call(t *testing.T, want, other *trunk, failover bool) {
	t.Helper()
	w, o, before := want.relay.counts(), other.relay.counts(), len(r.k.routes())
	placeCall(t, r.k)
	wantRoutes := []string{"first du=" + want.dest}
	if failover {
		wantRoutes = []string{"first du=" + other.dest, "failover du=" + want.dest}
	}
	// Kamailio logged each attempt before the call could complete; the
	// lines may still be on their way through the pipe.
	var got []string
	eventually(t, peerBound, "Kamailio's DSROUTE lines of the call", func() bool {
		got = r.k.routes()[before:]
		return len(got) >= len(wantRoutes)
	})
	dw, do := want.relay.counts().Invites-w.Invites, other.relay.counts().Invites-o.Invites
	if !slices.Equal(got, wantRoutes) || dw != 1 || (do > 0) != failover {
		t.Fatalf("Kamailio routed the call %q, want %q; INVITEs: %s got %d, %s got %d",
			got, wantRoutes, want.name, dw, other.name, do)
	}
}

// expectEach waits until qualifyd has printed (since it started) a line
// containing each of wants, in any order.
func (d *daemonProc) expectEach(wants ...string) {
	d.t.Helper()
	for _, w := range wants {
		if !slices.ContainsFunc(d.seen, func(l string) bool { return strings.Contains(l, w) }) {
			d.expect(w)
		}
	}
}

// drain moves the lines qualifyd has printed so far into seen.
func (d *daemonProc) drain() {
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				return
			}
			d.seen = append(d.seen, l)
		default:
			return
		}
	}
}

// TestKamailioHarness checks the test's peers without qualifyd's sink:
// Kamailio starts with the testdata configuration, its JSON-RPC reads and
// sets dispatcher states, a trunk set inactive by hand is skipped at the
// first attempt, a dead trunk still active is failed over, a reload resets
// the states, and qualifyd probes both trunks through their relays.
func TestKamailioHarness(t *testing.T) {
	r, _ := upThroughOneLostProbe(t, false)
	step(t, "3 A inactive by hand", func() {
		r.k.setState("i", r.a.dest)
		if st := r.k.state(r.a.dest); st != "I" {
			t.Fatalf("after set_state i, A is %q", st)
		}
		r.call(t, r.b, r.a, false)
	})
	step(t, "4 reload resets A", func() {
		r.k.reload()
		if st := r.k.state(r.a.dest); st != "A" {
			t.Fatalf("after dispatcher.reload, A is %q, want A", st)
		}
	})
	step(t, "5 a dead A still active is failed over", func() {
		r.a.relay.setDead(true)
		r.call(t, r.b, r.a, true)
	})
}

// TestKamailioFollowsQualifyd is the scenario with the kamailio sink:
// a lost probe leaves A routable, a dead A is taken out of routing before
// any call needs failover, and a dispatcher.reload is repaired.
func TestKamailioFollowsQualifyd(t *testing.T) {
	r, d := upThroughOneLostProbe(t, true)
	step(t, "3 A stopped is inactive", func() {
		r.a.relay.setDead(true)
		d.expect(contactLine(r.a) + "is now Unreachable.")
		eventually(t, peerBound, "A inactive in dispatcher.list", func() bool { return r.k.state(r.a.dest) == "I" })
		// The log records when routing changed in the router.
		d.expect("qualifyd: sink edge: host " + strings.TrimPrefix(r.a.dest, "sip:") + " is now down in the router")
		r.call(t, r.b, r.a, false)
	})
	step(t, "4 reload is repaired", func() { r.reloadRepaired(t) })
}

// reloadRepaired resets the states with a dispatcher.reload and waits for
// the sink to take A out again within its resync interval. If the sink's
// resync happened to land between the reload and the test's read (A
// already inactive again), the reload is repeated: the test must see A
// active once, or it would not know the reload happened.
func (r *routing) reloadRepaired(t *testing.T) {
	s := r.k.watch(r.a.dest)
	var active time.Time // when Kamailio answered A active after the reload
	for attempt := 1; ; attempt++ {
		r.k.reload()
		if r.k.state(r.a.dest) == "A" {
			active = time.Now()
			break
		}
		if attempt == 3 {
			t.Fatal("A was inactive right after each of 3 dispatcher.reloads")
		}
	}
	eventually(t, peerBound, "the sink sets A inactive again", func() bool { return r.k.state(r.a.dest) == "I" })
	took := s.first(t, r.a.dest, "I", active).Sub(active)
	t.Logf("A inactive again %v after Kamailio answered it active, as its replies date it (resync_interval %v)", took.Round(time.Millisecond), resyncInterval)
	if took > resyncInterval+3*time.Second {
		t.Fatalf("A inactive again %v after the reload, want within resync_interval %v + 3 s", took, resyncInterval)
	}
	if st := r.k.state(r.b.dest); st != "A" {
		t.Fatalf("B is %q after the resync, want A", st)
	}
}

// TestKamailioStateFileKeepsTrunkDown kills qualifyd (SIGKILL) while trunk
// A is down and restarts it with the same --state-file: A stays inactive
// in Kamailio throughout, and the restarted qualifyd knows A is
// Unreachable before it could have found out again.
func TestKamailioStateFileKeepsTrunkDown(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	ctx, cancel := context.WithTimeout(t.Context(), peerBound)
	defer cancel()
	if help, _ := exec.CommandContext(ctx, binary, "run", "-h").CombinedOutput(); !strings.Contains(string(help), "-state-file") {
		t.Fatalf("qualifyd run has no --state-file flag; this test needs the state-file change merged. run -h:\n%s", help)
	}
	r := newRouting(t, true)
	r.a.relay.setDead(true)
	state := filepath.Join(t.TempDir(), "qualifyd.state")
	args := []string{"--http", "127.0.0.1:0", "--state-file", state}
	d := r.qualifyd(t, args...)
	d.expectEach(contactLine(r.a)+"is now Unreachable.", contactLine(r.b)+"is now Reachable.")
	eventually(t, peerBound, "A inactive in dispatcher.list", func() bool { return r.k.state(r.a.dest) == "I" })
	waitSaved(t, state, r.a.contact, qualify.Unreachable)

	s := r.k.watch(r.a.dest)
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	sent := r.a.relay.counts().Options
	r.restoredDown(t, r.qualifyd(t, args...), sent)
	// The third OPTIONS goes out when two probes have ended.
	eventually(t, peerBound, "the restarted qualifyd probes A twice", func() bool {
		return r.a.relay.counts().Options-sent >= 3
	})
	s.end(t, r.a.dest, "I")
}

// restoredDown checks that the restarted qualifyd d reports A Unreachable
// before it could have found out again: a fresh verdict needs
// qualify_failures=3 probes, so with fewer of them sent (since sent) the
// verdict is the restored one.
func (r *routing) restoredDown(t *testing.T, d *daemonProc, sent int) {
	t.Helper()
	base := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.seen[len(d.seen)-1])[1]
	code, body := get(t, "GET", base+"/api/v1/contacts", "")
	probes := r.a.relay.counts().Options - sent
	if code != 200 || !strings.Contains(body, `"uri":"`+r.a.contact+`","status":"Unreachable","routable":false`) {
		t.Fatalf("restarted qualifyd, after %d probes of A: A is not restored Unreachable: %d %s", probes, code, body)
	}
	if probes >= 3 {
		t.Fatalf("inconclusive: qualifyd had sent %d probes to A before its API answered", probes)
	}
}

// waitSaved waits until the state file at path holds the contact uri at
// status: a restart from it then restores that verdict.
func waitSaved(t *testing.T, path, uri string, status qualify.Status) {
	t.Helper()
	eventually(t, 25*time.Second, fmt.Sprintf("state file holds %s %v", uri, status), func() bool {
		f, err := state.Read(path)
		if err != nil {
			return false
		}
		for _, c := range f.Contacts {
			if c.URI == uri {
				return c.State.Status == status
			}
		}
		return false
	})
}
