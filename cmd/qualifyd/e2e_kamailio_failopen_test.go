package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Fail-open with the real Kamailio: qualifyd renews the htable item
// qualifyd=>heartbeat every heartbeat_interval with an expiry of
// failopen_after, and kamailio.cfg's event_route[htable:expired:qualifyd]
// reloads the dispatcher when it expires, so every destination qualifyd
// set inactive is active again. The tests shorten both (1 s and 3 s, the
// least the option allows) so that the window passes quickly; nothing
// else depends on their length.
const (
	testHeartbeat = time.Second
	testFailOpen  = 3 * time.Second
)

// failOpenRouting is newRouting with the kamailio sink's heartbeat
// shortened to testHeartbeat and testFailOpen.
func failOpenRouting(t *testing.T) *routing {
	t.Helper()
	r := newRouting(t, true)
	f, err := os.OpenFile(r.conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("heartbeat_interval=1\nfailopen_after=3\n"); err != nil {
		t.Fatal(err)
	}
	return r
}

// heartbeat is the value of qualifyd=>heartbeat in Kamailio (the unix
// second qualifyd last renewed it), or 0 when there is no such item.
func (k *kamailio) heartbeat() int64 {
	raw, err := k.call("htable.get", "qualifyd", "heartbeat")
	if err != nil {
		return 0
	}
	var r struct{ Item struct{ Value int64 } }
	if err := json.Unmarshal(raw, &r); err != nil {
		k.t.Fatalf("htable.get: %v: %s", err, raw)
	}
	return r.Item.Value
}

// renewals waits until qualifyd has renewed the heartbeat n times (n
// distinct values), which spans more than failopen_after when n exceeds
// it in heartbeat intervals.
func (k *kamailio) renewals(n int) {
	k.t.Helper()
	seen := map[int64]bool{}
	eventually(k.t, time.Duration(n+2)*testHeartbeat+peerBound, "qualifyd renews the heartbeat", func() bool {
		if v := k.heartbeat(); v != 0 {
			seen[v] = true
		}
		return len(seen) >= n
	})
}

// failedOpen waits until Kamailio has made uri active again, at most
// after (the sinks' failopen_after) + 10 s after since, and returns how long it took; the
// reload must be the fail-open route's.
func (k *kamailio) failedOpen(uri string, since time.Time, after time.Duration) time.Duration {
	k.t.Helper()
	eventually(k.t, after+10*time.Second, uri+" active again (fail-open)", func() bool { return k.state(uri) == "A" })
	d := time.Since(since)
	if !strings.Contains(k.log.String(), "qualifyd heartbeat expired: dispatcher reloaded, every destination active") {
		k.t.Fatalf("%s is active again, but Kamailio did not log the fail-open route's reload", uri)
	}
	return d
}

// aDown starts failOpenRouting with A dead and qualifyd running (with a
// state file if withState is set), and waits until A is inactive in
// Kamailio and the state file holds it.
func aDown(t *testing.T, withState bool) (*routing, *daemonProc, []string) {
	t.Helper()
	r := failOpenRouting(t)
	r.a.relay.setDead(true)
	state := filepath.Join(t.TempDir(), "qualifyd.state")
	args := []string{"--http", "127.0.0.1:0"}
	if withState {
		args = append(args, "--state-file", state)
	}
	d := r.qualifyd(t, args...)
	d.expectEach(contactLine(r.a)+"is now Unreachable.", contactLine(r.b)+"is now Reachable.")
	eventually(t, peerBound, "A inactive in dispatcher.list", func() bool { return r.k.state(r.a.dest) == "I" })
	if withState {
		waitSaved(t, state, r.a.contact, qualify.Unreachable)
	}
	return r, d, args
}

// TestKamailioFailsOpenWhenQualifydDies: while qualifyd runs, its
// heartbeat keeps A inactive over more than failopen_after (no spurious
// reload); after `kill -9`, with A's peer back, Kamailio makes A active
// within failopen_after + 10 s and routes a call to it; qualifyd
// restarted after the window with its state file sets A inactive again
// from the restored verdict, before it could have found out again.
func TestKamailioFailsOpenWhenQualifydDies(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	r, d, args := aDown(t, true)
	step(t, "1 a running qualifyd keeps A inactive", func() {
		s := r.k.watch(r.a.dest)
		r.k.renewals(5)
		s.end(t, r.a.dest, "I")
	})
	step(t, "2 kill -9: A active again within failopen_after + 10 s", func() {
		r.a.relay.setDead(false)
		if err := d.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		_ = d.cmd.Wait()
		t.Logf("fail-open delay after kill -9: %v (failopen_after %v)", r.k.failedOpen(r.a.dest, killed, testFailOpen).Round(10*time.Millisecond), testFailOpen)
		r.call(t, r.a, r.b, false)
	})
	step(t, "3 restarted after the window: A inactive from the restored verdict", func() {
		r.a.relay.setDead(true)
		sent := r.a.relay.counts().Options
		d2 := r.qualifyd(t, args...)
		eventually(t, peerBound, "A inactive again", func() bool { return r.k.state(r.a.dest) == "I" })
		if probes := r.a.relay.counts().Options - sent; probes >= 3 {
			t.Fatalf("inconclusive: A was set inactive after %d probes, enough for a fresh verdict", probes)
		}
		r.restoredDown(t, d2, sent)
	})
}

// TestKamailioFailsOpenWhenQualifydStalls: a stopped qualifyd (SIGSTOP,
// as a process that no longer runs) stops renewing the heartbeat, and
// Kamailio makes A active within failopen_after + 10 s; once it runs
// again (SIGCONT) its next heartbeat finds the item gone, and it reads
// dispatcher.list again and sets A inactive at once, without waiting for
// resync_interval.
func TestKamailioFailsOpenWhenQualifydStalls(t *testing.T) {
	r, d, _ := aDown(t, false)
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("fail-open delay after SIGSTOP: %v", r.k.failedOpen(r.a.dest, stopped, testFailOpen).Round(10*time.Millisecond))
	if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	d.expect("the heartbeat had expired: Kamailio failed open (or restarted) and reset every destination; reading dispatcher.list again")
	eventually(t, peerBound, "A inactive again after SIGCONT", func() bool { return r.k.state(r.a.dest) == "I" })
}

// TestKamailioFailsOpenWhenPartitioned: qualifyd cut off from Kamailio's
// RPC port (a proxy between them closes every connection) can renew no
// heartbeat, and Kamailio makes A active within failopen_after + 10 s;
// once the port answers again, qualifyd's next attempt renews the
// heartbeat, reads dispatcher.list and sets A inactive again.
func TestKamailioFailsOpenWhenPartitioned(t *testing.T) {
	r := failOpenRouting(t)
	p := peertest.NewProxy(t, strings.TrimSuffix(strings.TrimPrefix(r.k.rpc, "http://"), "/RPC"))
	conf, err := os.ReadFile(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, r.conf, strings.Replace(string(conf), "url="+r.k.rpc, "url=http://"+p.Addr()+"/RPC", 1))
	r.a.relay.setDead(true)
	d := r.qualifyd(t, "--http", "")
	d.expect(contactLine(r.a) + "is now Unreachable.")
	eventually(t, peerBound, "A inactive in dispatcher.list", func() bool { return r.k.state(r.a.dest) == "I" })
	p.SetCut(true)
	cut := time.Now()
	t.Logf("fail-open delay after the cut: %v", r.k.failedOpen(r.a.dest, cut, testFailOpen).Round(10*time.Millisecond))
	d.expect("qualifyd: sink edge: kamailio http://" + p.Addr() + "/RPC: ")
	p.SetCut(false)
	// The bound covers qualifyd's backoff (1 s doubling) over the cut.
	eventually(t, 2*peerBound, "A inactive again once the RPC port answers", func() bool { return r.k.state(r.a.dest) == "I" })
	d.expect("qualifyd: sink edge: connected")
}
