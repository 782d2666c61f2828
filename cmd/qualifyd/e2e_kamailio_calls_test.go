package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/peertest"
)

// Calls as evidence with the real Kamailio (contract §11): INVITEs relayed
// through its dispatcher to SIPp trunks, their outcomes posted to qualifyd
// by the kamailio.cfg lines docs/routers.md gives, and qualifyd's kamailio
// sink setting the destinations' states. Each trunk is behind a relay
// (e2e_kamailio_relay_test.go) that counts the OPTIONS it receives.

// swapPeer is a SIPp trunk behind a relay whose scenario the test
// changes, on the same port: a trunk that starts or stops draining.
type swapPeer struct {
	name  string
	r     *relay
	trunk *sippTrunk
}

// newSwapPeer starts SIPp playing scenario, a file of testdata/kamailio,
// and a relay in front of it.
func newSwapPeer(t *testing.T, name, scenario string) *swapPeer {
	t.Helper()
	port := freePort(t, "udp")
	p := &swapPeer{name: name, r: newRelay(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)))}
	p.trunk = newSippTrunkAt(t, port, p.addr(), filepath.Join("testdata", "kamailio", scenario), false)
	return p
}

func (p *swapPeer) addr() string    { return p.r.Addr().String() }
func (p *swapPeer) dest() string    { return "sip:" + p.addr() }
func (p *swapPeer) contact() string { return "sip:" + p.name + "@" + p.addr() }
func (p *swapPeer) line() string    { return "Contact " + p.name + "/" + p.contact() + " " }

// play restarts SIPp on its port with scenario, a file of testdata/kamailio.
func (p *swapPeer) play(scenario string) {
	p.trunk.swap(filepath.Join("testdata", "kamailio", scenario))
}

// options is the number of OPTIONS transactions the trunk received.
func (p *swapPeer) options() int { return p.r.counts().Options }

// callsConf writes qualifyd's configuration: the first probe within a
// second, extra (sinks), then each AoR (name, contact, options) as given.
func callsConf(t *testing.T, extra string, aors ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("[global]\ntype=global\nmax_initial_qualify_time=1\n" + extra)
	for i := 0; i+2 < len(aors); i += 3 {
		fmt.Fprintf(&b, "\n[%s]\ntype=aor\ncontact=%s\n%s", aors[i], aors[i+1], aors[i+2])
	}
	path := filepath.Join(t.TempDir(), "qualifyd.conf")
	writeFile(t, path, b.String())
	return path
}

// apiContact is the contact uri of aor in qualifyd's GET /api/v1/aors/NAME.
func apiContact(t *testing.T, apiAddr, aor, uri string) api.Contact {
	t.Helper()
	resp, err := http.Get("http://" + apiAddr + "/api/v1/aors/" + aor)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a api.AoR
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Contacts {
		if c.URI == uri {
			return c
		}
	}
	t.Fatalf("aor %s has no contact %s: %+v", aor, uri, a)
	return api.Contact{}
}

// observingKamailio starts Kamailio with the observation lines posting
// to qualifyd's API at apiAddr, and dispatcher set 1 the trunks in
// priority order.
func observingKamailio(t *testing.T, apiAddr string, trunks ...*swapPeer) *peertest.Kamailio {
	t.Helper()
	var dests []string
	for _, p := range trunks {
		dests = append(dests, p.dest())
	}
	return startObservingKamailio(t, "http://"+apiAddr, dests...)
}

// refQualify is the reference policy: F=30 T=3 N=3 R=2.
const refQualify = "qualify_frequency=30\nqualify_timeout=3\nqualify_failures=3\nqualify_retry_interval=2\n"

// sinkConfirmed waits until qualifyd's sink "edge" is up and Kamailio has
// confirmed every object it keeps at the level wanted: from then on the
// sink pushes any change at once, so a destination that stays active is
// one qualifyd never wanted down.
func sinkConfirmed(t *testing.T, apiAddr string) {
	t.Helper()
	eventually(t, peerBound, "the kamailio sink confirmed", func() bool {
		resp, err := http.Get("http://" + apiAddr + "/api/v1/sinks/edge")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var d api.SinkDetail
		if json.NewDecoder(resp.Body).Decode(&d) != nil || !d.Up || d.Pending != 0 || len(d.Items) == 0 {
			return false
		}
		for _, it := range d.Items {
			if it.Confirmed != it.Wanted {
				return false
			}
		}
		return true
	})
}

// kamailioSink is qualifyd's sink section for k.
func kamailioSink(k *peertest.Kamailio) string {
	return fmt.Sprintf("\n[edge]\ntype=sink\ndriver=kamailio\nurl=%s\n", k.RPC)
}

// caller places a call through a Kamailio every interval, one at a time,
// until stopped, and keeps when the last completed.
type caller struct {
	stop, done chan struct{}
	mu         sync.Mutex // holds the fields below
	calls      int        // completed
	last       time.Time  // when the last completed call ended
	errs       []string
}

func startCaller(t *testing.T, sip string, interval time.Duration) *caller {
	c := &caller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			err := callThrough(t, sip)
			c.mu.Lock()
			if err != nil {
				c.errs = append(c.errs, err.Error())
			} else {
				c.calls, c.last = c.calls+1, time.Now()
			}
			c.mu.Unlock()
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(c.end)
	return c
}

// end stops calling and waits for the call in progress; idempotent.
func (c *caller) end() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *caller) state() (int, time.Time, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.last, c.errs
}

// answers is a proxy in front of qualifyd's API that notes when it
// last passed on a body with an answered call: when qualifyd heard it,
// to the proxy's few hundred microseconds.
type answers struct {
	next http.Handler
	mu   sync.Mutex
	n    int       // answers passed on
	last time.Time // when the last body with an answer reached qualifyd
}

// newAnswers starts the proxy towards qualifyd's API at apiAddr and
// returns it and its address.
func newAnswers(t *testing.T, apiAddr string) (*answers, string) {
	a := &answers{next: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: apiAddr})}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, strings.TrimPrefix(srv.URL, "http://")
}

func (a *answers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if n := bytes.Count(body, []byte(`"answered"`)); n > 0 {
		a.mu.Lock()
		a.n, a.last = a.n+n, time.Now()
		a.mu.Unlock()
	}
	a.next.ServeHTTP(w, r)
}

// heard returns the answers passed on so far, and when the last was.
func (a *answers) heard() (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.last
}

// quietRun is one run of the quiet trunk: qualify's options, the call
// interval C and the window in which OPTIONS are counted.
type quietRun struct {
	f       time.Duration // qualify_frequency
	qualify string        // the AoRs' qualify options
	call    time.Duration // C
	window  time.Duration
}

// quietResult is what a quietRun measured.
type quietResult struct {
	quiet, plain int           // OPTIONS received in the window
	back         time.Duration // from qualifyd hearing the quiet trunk's last call to its next OPTIONS
}

// runQuiet runs two identical SIPp trunks, each behind its own Kamailio
// carrying a call every run.call, with one qualifyd qualifying both,
// qualify_quiet_only=yes on "quiet" only: the OPTIONS each receives in
// run.window once the calls are heard, then how long after the last
// call the quiet trunk is probed again.
func runQuiet(t *testing.T, run quietRun) quietResult {
	quiet, plain := newSwapPeer(t, "quiet", "trunk.xml"), newSwapPeer(t, "plain", "trunk.xml")
	apiAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	ans, proxy := newAnswers(t, apiAddr)
	kq, kp := observingKamailio(t, proxy, quiet), observingKamailio(t, apiAddr, plain)
	conf := callsConf(t, "", "quiet", quiet.contact(), run.qualify+"qualify_quiet_only=yes\n", "plain", plain.contact(), run.qualify)
	d := startDaemon(t, "--config", conf, "--http", apiAddr, "--sip-bind", "127.0.0.1:0")
	d.expect("qualifyd: started")
	d.expectEach(quiet.line()+"is now Reachable.", plain.line()+"is now Reachable.")
	cq, cp := startCaller(t, kq.SIP, run.call), startCaller(t, kp.SIP, run.call)
	// The window opens once qualifyd has heard every call completed so far,
	// at least one over each trunk.
	eventually(t, peerBound, "the calls' answers heard", func() bool {
		nq, _, _ := cq.state()
		np, _, _ := cp.state()
		heard := metric(t, "http://"+apiAddr, `qualifyd_observations_total{outcome="answered",source="kamailio"}`)
		return nq > 0 && np > 0 && heard >= float64(nq+np)
	})
	q0, p0 := quiet.options(), plain.options()
	time.Sleep(run.window)
	res := quietResult{quiet: quiet.options() - q0, plain: plain.options() - p0}
	cq.end()
	cp.end()
	for _, c := range []*caller{cq, cp} {
		if _, _, errs := c.state(); len(errs) > 0 {
			t.Fatalf("%d calls failed, the first: %s", len(errs), errs[0])
		}
	}
	n, last := quiet.options(), time.Time{}
	calls, _, _ := cq.state()
	eventually(t, peerBound, "the last call's answer heard", func() bool {
		var got int
		got, last = ans.heard()
		return got >= calls
	})
	var probed time.Time
	eventually(t, run.f+peerBound, "the quiet trunk probed again after its last call", func() bool {
		probed = time.Now()
		return quiet.options() > n
	})
	res.back = probed.Sub(last)
	return res
}

// TestKamailioQuietTrunk: two identical healthy trunks each carry a call
// every second through the real Kamailio, whose lines post the answers to
// qualifyd; with F=5, the trunk with qualify_quiet_only=yes receives no
// OPTIONS in 30 s, the one without about 6, and the quiet trunk is probed
// again F after qualifyd heard its last call (its answer's time), within
// the qualify_timeout T. About 40 s, in parallel with the other calls
// tests.
func TestKamailioQuietTrunk(t *testing.T) {
	t.Parallel()
	const f = 5 * time.Second
	run := quietRun{f: f, qualify: "qualify_frequency=5\nqualify_timeout=1\nqualify_failures=3\nqualify_retry_interval=1\n",
		call: time.Second, window: 30 * time.Second}
	res := runQuiet(t, run)
	t.Logf("OPTIONS in %v: %d with qualify_quiet_only, %d without; probed again %.2f s after qualifyd heard the last call (F %v)",
		run.window, res.quiet, res.plain, res.back.Seconds(), f)
	if res.quiet != 0 {
		t.Errorf("the quiet trunk received %d OPTIONS in %v of calls, want 0", res.quiet, run.window)
	}
	if want := int(run.window/f) - 1; res.plain < want {
		t.Errorf("the trunk without the option received %d OPTIONS in %v, want at least %d (one each F)", res.plain, run.window, want)
	}
	// The probe is due F after qualifyd heard the last call; its timer,
	// its send and the relay's count (read every 20 ms) are bounded by T,
	// as in the Asterisk test (5.01 to 5.02 s at F=5 measured alone). A
	// probe that waited for the next period would be a whole F late.
	if res.back > f+time.Second {
		t.Errorf("the quiet trunk was probed %v after qualifyd heard its last call, want F (%v) after it, within T (1s)", res.back, f)
	}
}

// TestKamailioFailedCallsBurst: one caller sends 20 INVITEs in 2 s
// through the real Kamailio to a healthy trunk that answers them 503
// without Retry-After (each indicts the peer: suspect, probe now) and its
// OPTIONS 200, with the reference policy F=30 T=3 N=3 R=2. Once the
// sink is up and Kamailio has confirmed what it keeps (so a wanted change
// would be pushed at once), Kamailio's dispatcher keeps the destination
// active in every sample of its RPC
// from before the burst until 10 s after it began, the contact never
// leaves Reachable nor counts a failure, and the burst costs at most
// three probes brought forward (one each R = 2 s, contract §11.2),
// counted both at the trunk and in qualifyd_probes_pulled_total.
// About 14 s, in parallel with the other calls tests.
func TestKamailioFailedCallsBurst(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second // from the burst's start; the next periodic probe is F=30 s after the first
	trunk := newSwapPeer(t, "trunk", "trunk-503.xml")
	apiAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	k := observingKamailio(t, apiAddr, trunk)
	conf := callsConf(t, kamailioSink(k), "trunk", trunk.contact(), refQualify)
	d := startDaemon(t, "--config", conf, "--http", apiAddr, "--sip-bind", "127.0.0.1:0")
	d.expect("qualifyd: started")
	d.expect(trunk.line() + "is now Reachable.")
	sinkConfirmed(t, apiAddr)
	rpc := &kamailio{t: t, rpc: k.RPC}
	watch := rpc.watch(trunk.dest())
	before := trunk.options()
	start := time.Now()
	sf, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "caller-fail.xml"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*peerBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, requirePeer(t, "sipp"), "-sf", sf, "-i", "127.0.0.1",
		"-p", strconv.Itoa(freePort(t, "udp")), "-t", "u1", "-r", "10", "-m", "20", "-s", "trunk", "-nostdin",
		"-timeout", peerBound.String(), "-timeout_error", "-max_recv_loops", "1000", k.SIP)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the burst's caller: %v\n%s", err, out)
	}
	burst := time.Since(start)
	time.Sleep(window - burst)
	watch.end(t, trunk.dest(), "A")
	extra := trunk.options() - before
	pulled := metric(t, "http://"+apiAddr, "qualifyd_probes_pulled_total")
	failed := metric(t, "http://"+apiAddr, `qualifyd_observations_total{outcome="failed",source="kamailio"}`)
	t.Logf("20 failed calls in %.2f s: %d INVITEs at the trunk, %v failures heard, %d extra OPTIONS (%v pulled)",
		burst.Seconds(), trunk.r.counts().Invites, failed, extra, pulled)
	if failed != 20 {
		t.Errorf("qualifyd heard %v failed calls from Kamailio, want 20", failed)
	}
	if extra < 1 || extra > 3 || float64(extra) != pulled {
		t.Errorf("the burst cost %d OPTIONS, %v pulled; want 1 to 3, all of them pulled", extra, pulled)
	}
	if c := apiContact(t, apiAddr, "trunk", trunk.contact()); c.Status != "Reachable" || c.FailuresTotal != 0 {
		t.Errorf("after the burst the contact is %s with %d failures, want Reachable with none", c.Status, c.FailuresTotal)
	}
	d.drain()
	for _, l := range d.seen {
		if strings.Contains(l, "Unreachable") {
			t.Errorf("qualifyd logged %q", l)
		}
	}
}

// outFor follows p's destination in Kamailio's dispatcher.list from
// now: it waits until the destination is inactive, then active again,
// and returns how long it was inactive (between the first samples that
// read each) and the trunk's OPTIONS count when it went inactive. It
// runs beside the test's goroutine, so it returns an error rather than
// failing the test.
func outFor(rpc *kamailio, p *swapPeer, bound time.Duration) (time.Duration, int, error) {
	state := func() string { st, _ := rpc.states(); return st[p.dest()] }
	until := func(bound time.Duration, want string) bool {
		for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if state() == want {
				return true
			}
		}
		return false
	}
	if !until(peerBound, "I") {
		return 0, 0, fmt.Errorf("%s not inactive in dispatcher.list within %v", p.name, peerBound)
	}
	out, opts := time.Now(), p.options()
	if !until(bound, "A") {
		return 0, 0, fmt.Errorf("%s not active again in dispatcher.list within %v", p.name, bound)
	}
	return time.Since(out), opts, nil
}

// TestKamailioDraining: two trunks of the real Kamailio's dispatcher set
// drain, answering 503 with Retry-After: 20, one to qualifyd's OPTIONS
// ("options": its first probe), one to a call Kamailio relays and then
// fails over to a third trunk ("call": the outcome Kamailio's lines post).
// Each peer is healthy again at once (it asked for 20 s all the same).
// For each, qualifyd logs the drain, the sink sets the destination
// inactive, qualifyd sends it no OPTIONS for 20 s, and the first probe
// after the pause sets it active again: out of routing for 20 s
// (measured from Kamailio's RPC, which is sampled every few tens of ms;
// at most the pause plus the probe's T of 1 s), with no failure counted
// (the contact's failures_total 0, no probe counted as a failure, one as
// draining, no status change). About 25 s, in parallel with the other
// calls tests.
func TestKamailioDraining(t *testing.T) {
	t.Parallel()
	const pause = 20 * time.Second
	call, ok, opts := newSwapPeer(t, "call", "trunk.xml"), newSwapPeer(t, "ok", "trunk.xml"), newSwapPeer(t, "options", "drain.xml")
	apiAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	k := observingKamailio(t, apiAddr, call, ok, opts)
	rpc := &kamailio{t: t, rpc: k.RPC}
	// F=60: no periodic probe while the test runs, only the first, the
	// pauses' ends, and what calls bring forward.
	q := "qualify_frequency=60\nqualify_timeout=1\nqualify_failures=3\nqualify_retry_interval=1\n"
	conf := callsConf(t, kamailioSink(k), "call", call.contact(), q, "ok", ok.contact(), q, "options", opts.contact(), q)
	// Each destination is followed from before its drain can begin.
	var wg sync.WaitGroup
	var optsOut, callOut time.Duration
	var optsAt, callAt int
	var optsErr, callErr error
	wg.Go(func() { optsOut, optsAt, optsErr = outFor(rpc, opts, pause+peerBound) })
	d := startDaemon(t, "--config", conf, "--http", apiAddr, "--sip-bind", "127.0.0.1:0")
	d.expect("qualifyd: started")
	d.expectEach(call.line()+"is now Reachable.", ok.line()+"is now Reachable.",
		opts.line()+"is draining (503 with Retry-After): out of routing for 20s")
	opts.play("trunk.xml")
	call.play("drain.xml")
	wg.Go(func() { callOut, callAt, callErr = outFor(rpc, call, pause+peerBound) })
	if err := callThrough(t, k.SIP); err != nil {
		t.Fatalf("the call did not fail over to ok: %v\nKamailio:\n%s", err, k.Log)
	}
	call.play("trunk.xml")
	d.expect(call.line() + "is draining (503 with Retry-After): out of routing for 20s")
	if c := apiContact(t, apiAddr, "call", call.contact()); c.Phase != "draining" || c.Routable || c.Status != "Reachable" {
		t.Errorf("call while draining: phase %q, routable %v, %s; want draining, not routable, still Reachable", c.Phase, c.Routable, c.Status)
	}
	wg.Wait()
	if callErr != nil || optsErr != nil {
		t.Fatalf("call: %v; options: %v", callErr, optsErr)
	}
	for _, c := range []struct {
		p   *swapPeer
		out time.Duration
		at  int
	}{{opts, optsOut, optsAt}, {call, callOut, callAt}} {
		t.Logf("%s: out of Kamailio's routing for %.2f s", c.p.name, c.out.Seconds())
		if c.out < pause-500*time.Millisecond || c.out > pause+time.Second {
			t.Errorf("%s out of routing for %v, want the pause it asked for, %v (and the probe after it)", c.p.name, c.out, pause)
		}
		if n := c.p.options(); n != c.at+1 {
			t.Errorf("%s received %d OPTIONS from the drain to its return, want 1 (the first probe after the pause)", c.p.name, n-c.at)
		}
		if ct := apiContact(t, apiAddr, c.p.name, c.p.contact()); ct.Status != "Reachable" || ct.FailuresTotal != 0 || !ct.Routable {
			t.Errorf("%s after the pause: %s, routable %v, %d failures; want Reachable, routable, none", c.p.name, ct.Status, ct.Routable, ct.FailuresTotal)
		}
	}
	for series, want := range map[string]float64{
		`qualifyd_probes_total{reason="draining",result="draining"}`:      1,
		`qualifyd_probes_total{reason="timeout",result="failure"}`:        0,
		`qualifyd_probes_total{reason="status",result="failure"}`:         0,
		`qualifyd_probes_total{reason="transport",result="failure"}`:      0,
		`qualifyd_observations_total{outcome="failed",source="kamailio"}`: 1,
	} {
		if got := metric(t, "http://"+apiAddr, series); got != want {
			t.Errorf("%s %v, want %v", series, got, want)
		}
	}
	d.drain()
	for _, l := range d.seen {
		if strings.Contains(l, "Unreachable") {
			t.Errorf("qualifyd logged %q", l)
		}
	}
}

// TestKamailioDrainingFailsOpen backs docs/routers.md's "When qualifyd
// dies with a trunk held out as draining" for Kamailio: a peer answers
// qualifyd's OPTIONS 503 with Retry-After: 20, and the sink sets its
// destination inactive; qualifyd is killed (-9) at once, and Kamailio's
// heartbeat item expires failopen_after (3 s here) after its last renewal,
// which reloads the dispatcher: the destination is active again well
// before the 20 s the peer asked for, as for a down trunk. About 6 s, in
// parallel with the other calls tests.
func TestKamailioDrainingFailsOpen(t *testing.T) {
	t.Parallel()
	const pause = 20 * time.Second
	p := newSwapPeer(t, "trunk", "drain.xml")
	apiAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	pk := observingKamailio(t, apiAddr, p)
	k := &kamailio{t: t, rpc: pk.RPC, log: pk.Log}
	conf := callsConf(t, kamailioSink(pk)+"heartbeat_interval=1\nfailopen_after=3\n", "trunk", p.contact(), refQualify)
	d := startDaemon(t, "--config", conf, "--http", apiAddr, "--sip-bind", "127.0.0.1:0")
	d.expect(p.line() + "is draining (503 with Retry-After): out of routing for 20s")
	drained := time.Now()
	eventually(t, peerBound, "the draining trunk inactive in dispatcher.list", func() bool { return k.state(p.dest()) == "I" })
	back := k.failedOpen(p.dest(), kill(t, d), 3*time.Second)
	t.Logf("active again %.2f s after qualifyd was killed, %.2f s into the 20 s pause", back.Seconds(), time.Since(drained).Seconds())
	if since := time.Since(drained); since >= pause {
		t.Fatalf("active again %v after the drain began: the pause's end, not the fail-open", since)
	}
}
