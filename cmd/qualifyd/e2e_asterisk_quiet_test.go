package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/peertest"
)

// The calls' rules of qualify-semantics §11 against the real Asterisk:
// calls placed through its dial plan (channel originate into
// Dial(PJSIP/<trunk>,60)) to SIPp trunks, heard by qualifyd's ami sink
// with observe_calls=yes, whose custom devices (Custom:<trunk>) are what
// Asterisk routes by. Each SIPp logs its messages (-trace_msg), so that
// the OPTIONS a trunk received are counted at the trunk, with SIPp's own
// clock. The same functions give the fuller figures of
// docs/performance.md (figure_router_calls_test.go) at F=30 T=3 N=3 R=2.

// callScale is the timing of one run: the trunks' qualify options and
// the calls' cadence.
type callScale struct {
	qualify string        // the AoRs' qualify lines
	f, t    time.Duration // qualify_frequency, qualify_timeout
	gap     time.Duration // Policy.PullGap: min(R, T)
	call    time.Duration // a call every C to a busy trunk
	window  time.Duration // the quiet trunk's window
}

// callTestScale is make test's: F=5 T=1 N=3 R=1, a call every 2 s, a
// 30 s window.
var callTestScale = callScale{
	qualify: "qualify_frequency=5\nqualify_timeout=1\nqualify_failures=3\nqualify_retry_interval=1\n",
	f:       5 * time.Second, t: time.Second, gap: time.Second,
	call: 2 * time.Second, window: 30 * time.Second,
}

// The trunks' scenarios: trunk.xml answers OPTIONS and calls 200;
// trunk-503.xml answers OPTIONS 200 and INVITEs 503 (no Retry-After);
// drain.xml answers both 503 with Retry-After: 20.
var (
	trunkXML    = filepath.Join("testdata", "kamailio", "trunk.xml")
	trunk503XML = filepath.Join("testdata", "kamailio", "trunk-503.xml")
	drainXML    = filepath.Join("testdata", "kamailio", "drain.xml")
)

// drainAsked is drain.xml's Retry-After.
const drainAsked = 20 * time.Second

// TestAsteriskQuietTrunk: two healthy trunks carry a call every 2 s
// through Asterisk, one with qualify_quiet_only=yes: over 30 s it
// receives no OPTIONS while the other receives about 30/F, and once the
// calls stop its probes resume F after the last answered call. About
// 40 s.
func TestAsteriskQuietTrunk(t *testing.T) {
	t.Parallel()
	quietTrunk(t, callTestScale)
}

// TestAsteriskFailedCallsBurst: 20 calls in 2 s from one caller to a
// healthy trunk that answers each INVITE 503 (a failure that indicts the
// peer) cost a few probes brought forward and change nothing in Asterisk:
// its device stays NOT_INUSE throughout. About 15 s.
func TestAsteriskFailedCallsBurst(t *testing.T) {
	t.Parallel()
	failedCallsBurst(t, callTestScale)
}

// TestAsteriskDrain: a trunk answering 503 with Retry-After: 20, to
// qualifyd's OPTIONS for one and to a call for the other, is out of
// Asterisk's routing for 20 s, back at the first probe after, and no
// failure is counted. About 28 s.
func TestAsteriskDrain(t *testing.T) {
	t.Parallel()
	drain(t, callTestScale)
}

// labTrunk is a trunk of a callLab: its name (endpoint, AoR and custom
// device), its peer, and lines added to its AoR in qualifyd's file.
type labTrunk struct {
	name  string
	peer  *sippTrunk
	extra string
}

// callLab is a real Asterisk that dials each trunk by name from its
// context out, and one qualifyd with an ami sink that hears the calls.
type callLab struct {
	t   *testing.T
	ast *peertest.Asterisk
	api string // qualifyd's HTTP address
	d   *daemonProc
	log *logbook
}

// labOptions are what a test adds to a callLab: dial plan appended to
// extensions.conf, lines of the sink's section.
type labOptions struct {
	dialplan, sink string
}

// startCallLab starts Asterisk with the trunks (PJSIP endpoints it does
// not qualify itself) and qualifyd qualifying them at sc, its ami sink
// hearing the calls. The calls' Manager session logs in after qualifyd
// starts: startCallLab
// calls a trunk of its own, warm, until qualifyd hears a call answered,
// and returns once each trunk's device is NOT_INUSE in Asterisk.
func startCallLab(t *testing.T, sc callScale, o labOptions, trunks ...labTrunk) *callLab {
	t.Helper()
	trunks = append(trunks, labTrunk{"warm", newTracedPeer(t, trunkXML), ""})
	ast := peertest.NewAsterisk(t)
	ast.Write("manager.conf", fmt.Sprintf("[general]\nenabled = yes\nport = %d\nbindaddr = 127.0.0.1\n\n"+
		"[qualifyd]\nsecret = %s\nread = call\nwrite = call,system\n", ast.AMIPort, peertest.AMISecret))
	var pj, q strings.Builder
	fmt.Fprintf(&pj, "[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n", ast.SIPPort)
	q.WriteString(figGlobal)
	for _, tr := range trunks {
		contact := "sip:" + tr.name + "@" + tr.peer.addr()
		fmt.Fprintf(&pj, "\n[%s]\ntype=endpoint\naors=%s\ncontext=in\ndisallow=all\nallow=ulaw\n\n[%s]\ntype=aor\ncontact=%s\nqualify_frequency=0\n",
			tr.name, tr.name, tr.name, contact)
		fmt.Fprintf(&q, "[%s]\ntype=endpoint\naors=%s\n\n[%s]\ntype=aor\ncontact=%s\n%s%s\n", tr.name, tr.name, tr.name, contact, sc.qualify, tr.extra)
	}
	ast.Write("pjsip.conf", pj.String())
	ast.Write("extensions.conf", "[out]\nexten => _[a-z].,1,Dial(PJSIP/${EXTEN},60)\n[in]\n"+o.dialplan)
	ast.Start()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ami.secret"), peertest.AMISecret+"\n")
	fmt.Fprintf(&q, "[asterisk]\ntype=sink\ndriver=ami\naddress=127.0.0.1:%d\nusername=qualifyd\nsecret_file=ami.secret\nobserve_calls=yes\n%s",
		ast.AMIPort, o.sink)
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, conf, q.String())
	lab := &callLab{t: t, ast: ast, api: "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))}
	lab.d = startDaemon(t, "--config", conf, "--http", lab.api, "--sip-bind", "127.0.0.1:0")
	lab.d.expect("qualifyd: started")
	lab.log = readLog(lab.d)
	for _, tr := range trunks {
		lab.log.wait(t, astBound, "Endpoint "+tr.name+" is now Reachable")
		eventually(t, astBound, "Custom:"+tr.name+" NOT_INUSE", func() bool { return lab.devstate(tr.name) == "NOT_INUSE" })
	}
	var called time.Time
	eventually(t, astBound, "a call heard over the Manager", func() bool {
		if time.Since(called) > time.Second {
			lab.call("warm")
			called = time.Now()
		}
		return lab.metric("qualifyd_observations_total", `outcome="answered"`) > 0
	})
	return lab
}

// call places one call to the trunk through the dial plan.
func (l *callLab) call(trunk string) {
	if _, err := l.ast.CLI("channel originate Local/" + trunk + "@out application Wait 1"); err != nil {
		l.t.Error(err)
	}
}

// callEvery calls each trunk every c until the returned stop is called,
// which waits for the caller to end and returns how many calls it placed
// to each trunk.
func (l *callLab) callEvery(c time.Duration, trunks ...string) (stop func() int) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	placed := 0
	wg.Go(func() {
		tick := time.NewTicker(c)
		defer tick.Stop()
		for {
			for _, tr := range trunks {
				l.call(tr)
			}
			placed++
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() int { close(done); wg.Wait(); return placed }
}

// devstate returns Custom:name's state in Asterisk ("" if unread).
func (l *callLab) devstate(name string) string {
	out, err := l.ast.CLI("database get CustomDevstate " + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value: "))
}

// stateChange is a custom device's state as read at a moment.
type stateChange struct {
	at    time.Time
	state string
}

func (c stateChange) String() string { return c.state + " at " + c.at.Format("15:04:05.000") }

// devWatch reads a custom device's state in Asterisk over and over, in
// the background, keeping each change read (the first read included).
type devWatch struct {
	mu      sync.Mutex
	changes []stateChange
	done    chan struct{}
	wg      sync.WaitGroup
}

// watchDevstate starts a devWatch of Custom:name, every 20 ms.
func (l *callLab) watchDevstate(name string) *devWatch {
	w := &devWatch{done: make(chan struct{})}
	w.wg.Go(func() {
		for {
			s := l.devstate(name)
			w.mu.Lock()
			if s != "" && (len(w.changes) == 0 || w.changes[len(w.changes)-1].state != s) {
				w.changes = append(w.changes, stateChange{time.Now(), s})
			}
			w.mu.Unlock()
			select {
			case <-w.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return w
}

// last is the state the watch read last, "" before its first read.
func (w *devWatch) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.changes) == 0 {
		return ""
	}
	return w.changes[len(w.changes)-1].state
}

// stop ends the watch and returns the changes it read.
func (w *devWatch) stop() []stateChange {
	close(w.done)
	w.wg.Wait()
	return w.changes
}

// metric sums the samples of the series name whose labels contain every
// one of labels (`outcome="failed"`), in qualifyd's /metrics.
func (l *callLab) metric(name string, labels ...string) float64 {
	sum := 0.0
	for _, line := range strings.Split(metricsText(l.t, l.api), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		all := true
		for _, lb := range labels {
			all = all && strings.Contains(series, lb)
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil && all {
			sum += v
		}
	}
	return sum
}

// contacts returns qualifyd's GET /api/v1/contacts, by AoR.
func (l *callLab) contacts() map[string]api.Contact {
	resp, err := http.Get("http://" + l.api + "/api/v1/contacts")
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Contacts []api.Contact `json:"contacts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		l.t.Fatal(err)
	}
	out := map[string]api.Contact{}
	for _, c := range body.Contacts {
		out[c.AoR] = c
	}
	return out
}

// quietTrunk: the trunks quiet (qualify_quiet_only=yes) and plain each
// carry a call every C; over the window, the OPTIONS each received; then
// the calls stop, and the first OPTIONS the quiet trunk receives after
// its last answered call.
func quietTrunk(t *testing.T, sc callScale) {
	quiet, plain := newTracedPeer(t, trunkXML), newTracedPeer(t, trunkXML)
	lab := startCallLab(t, sc, labOptions{},
		labTrunk{"quiet", quiet, "qualify_quiet_only=yes\n"}, labTrunk{"plain", plain, ""})
	stop := lab.callEvery(sc.call, "quiet", "plain")
	eventually(t, figBound, "both trunks answered a call", func() bool {
		return len(quiet.replies("SIP/2.0 200", "INVITE")) > 0 && len(plain.replies("SIP/2.0 200", "INVITE")) > 0
	})
	from := time.Now()
	time.Sleep(sc.window) // the figure's window, not a wait for an outcome
	to := time.Now()
	placed := stop()
	var answered []time.Time
	eventually(t, figBound, "every call answered", func() bool {
		answered = quiet.replies("SIP/2.0 200", "INVITE")
		return len(answered) >= placed
	})
	q, p := quiet.options(from, to), plain.options(from, to)
	last := answered[len(answered)-1]
	var back []time.Time
	eventually(t, sc.f+figBound, "the quiet trunk probed again after its last call", func() bool {
		back = quiet.options(last, time.Now().Add(time.Hour))
		return len(back) > 0
	})
	resume := back[0].Sub(last)
	skipped := lab.metric("qualifyd_probes_quiet_skipped_total")
	t.Logf("FIGURE quiet trunk: F=%v, a call every %v, over %v: OPTIONS received %d with qualify_quiet_only=yes against %d without (%.2f); "+
		"probing back %.2f s after the last answered call; %v probes skipped",
		sc.f, sc.call, sc.window, len(q), len(p), float64(len(q))/float64(len(p)), resume.Seconds(), skipped)
	if len(q) != 0 {
		t.Errorf("the quiet trunk received %d OPTIONS while it carried calls, at %v", len(q), q)
	}
	if want := int(sc.window/sc.f) - 1; len(p) < want {
		t.Errorf("the plain trunk received %d OPTIONS in %v, want at least %d: the baseline shows nothing", len(p), sc.window, want)
	}
	// The probe is due F after qualifyd heard the answer, which the
	// Manager reports once Asterisk has read the 200 (milliseconds here);
	// T bounds that report.
	if resume < sc.f || resume > sc.f+sc.t {
		t.Errorf("probing resumed %v after the last answered call, want F (%v) after it, within T (%v)", resume, sc.f, sc.t)
	}
	if skipped < float64(sc.window/sc.f)-1 {
		t.Errorf("qualifyd_probes_quiet_skipped_total %v", skipped)
	}
}

// failedCallsBurst: one caller places 20 calls in 2 s to busy, which
// answers every INVITE 503; idle, alike but without calls, is the
// baseline of probes in the same window (the burst and 2F after).
func failedCallsBurst(t *testing.T, sc callScale) {
	const calls, burst = 20, 2 * time.Second
	busy, idle := newTracedPeer(t, trunk503XML), newTracedPeer(t, trunkXML)
	lab := startCallLab(t, sc, labOptions{}, labTrunk{"busy", busy, ""}, labTrunk{"idle", idle, ""})
	watch := lab.watchDevstate("busy")
	from := time.Now()
	tick := time.NewTicker(burst / calls)
	for range calls {
		lab.call("busy")
		<-tick.C
	}
	tick.Stop()
	eventually(t, figBound, "20 failed calls heard", func() bool {
		return lab.metric("qualifyd_observations_total", `outcome="failed"`) >= calls
	})
	time.Sleep(time.Until(from.Add(2 * sc.f))) // the window's end, not a wait for an outcome
	to := time.Now()
	states := watch.stop()
	b, i := busy.options(from, to), idle.options(from, to)
	pulled := lab.metric("qualifyd_probes_pulled_total")
	refusals := busy.replies("SIP/2.0 503", "INVITE")
	refused := len(refusals)
	t.Logf("FIGURE failed calls: %d calls answered 503 in %v (F=%v, R and T giving a gap of %v): OPTIONS received %d against %d by a trunk without calls "+
		"(%+d; %v probes brought forward); Custom:busy in Asterisk throughout: %s",
		refused, burst, sc.f, sc.gap, len(b), len(i), len(b)-len(i), pulled, states)
	if refused != calls {
		t.Errorf("the trunk refused %d INVITEs, want %d", refused, calls)
	}
	if len(states) != 1 || states[0].state != "NOT_INUSE" {
		t.Errorf("Custom:busy in Asterisk went %v, want NOT_INUSE throughout", states)
	}
	if l := lab.log.find("busy", "Unreachable"); len(l) > 0 {
		t.Errorf("qualifyd took the trunk down: %q", l)
	}
	// A probe is brought forward no sooner than a gap after the end of
	// the last, and only by a call heard after that end (qualify-semantics
	// §11.2): the k-th needs a call at least (k-2) gaps after the first,
	// so over the refusals' span at most span/gap + 2.
	if refused == 0 {
		return
	}
	span := refusals[refused-1].Sub(refusals[0])
	if maxPulled := float64(span/sc.gap) + 2; pulled < 1 || pulled > maxPulled {
		t.Errorf("%v probes brought forward by calls refused over %v, want 1 to %v", pulled, span, maxPulled)
	}
}

// drain: the trunks byopt and bycall turn to drain.xml (503 with
// Retry-After: 20 to everything); bycall gets a call, byopt waits for its
// next probe; each is swapped back to trunk.xml once qualifyd says it
// drains. Asterisk's device of each is read throughout.
func drain(t *testing.T, sc callScale) {
	names := []string{"byopt", "bycall"}
	peers := map[string]*sippTrunk{"byopt": newTracedPeer(t, trunkXML), "bycall": newTracedPeer(t, trunkXML)}
	lab := startCallLab(t, sc, labOptions{}, labTrunk{"byopt", peers["byopt"], ""}, labTrunk{"bycall", peers["bycall"], ""})
	watches := map[string]*devWatch{}
	for _, n := range names {
		watches[n] = lab.watchDevstate(n)
		peers[n].swap(drainXML)
	}
	lab.call("bycall")
	// Each peer is back to normal once its drain began: the pause's
	// probe finds it so. The API reads the contact draining meanwhile.
	for _, n := range []string{"bycall", "byopt"} {
		lab.log.wait(t, sc.f+drainAsked+astBound, "Contact "+n+"/", "is draining (503 with Retry-After): out of routing for 20s")
		peers[n].swap(trunkXML)
		if c := lab.contacts()[n]; c.Phase != "draining" || c.Routable {
			t.Errorf("%s draining reads in the API: phase %q, routable %v", n, c.Phase, c.Routable)
		}
	}
	for _, n := range names {
		lab.log.wait(t, sc.f+drainAsked+astBound, "Contact "+n+"/", "is no longer draining")
		// The watch itself must have read it: its reads time the drain.
		eventually(t, astBound, "Custom:"+n+" NOT_INUSE again", func() bool { return watches[n].last() == "NOT_INUSE" })
	}
	contacts := lab.contacts()
	for _, n := range names {
		checkDrained(t, sc, n, peers[n], watches[n].stop(), contacts[n])
	}
	if f := lab.metric("qualifyd_probes_total", `result="failure"`); f != 0 {
		t.Errorf("qualifyd_probes_total counts %v failures", f)
	}
	if d := lab.metric("qualifyd_probes_total", `result="draining"`, `reason="draining"`); d != 2 {
		t.Errorf("qualifyd_probes_total counts %v draining, want 2", d)
	}
	if l := lab.log.find("Unreachable"); len(l) > 0 {
		t.Errorf("a drain took a trunk down: %q", l)
	}
}

// checkDrained checks one trunk's drain: Asterisk's device UNAVAILABLE
// then NOT_INUSE again, no OPTIONS from the 503 until drainAsked after
// it, no failure in the API.
func checkDrained(t *testing.T, sc callScale, name string, peer *sippTrunk, states []stateChange, c api.Contact) {
	t.Helper()
	asked := peer.replies("SIP/2.0 503", "OPTIONS")
	if len(asked) != 1 {
		t.Fatalf("%s answered %d OPTIONS 503, want 1", name, len(asked))
	}
	next := peer.options(asked[0].Add(time.Millisecond), asked[0].Add(time.Hour))
	if len(next) == 0 {
		t.Fatalf("%s: no OPTIONS after the drain", name)
	}
	paused := next[0].Sub(asked[0])
	var out time.Duration
	if len(states) == 3 && states[0].state == "NOT_INUSE" && states[1].state == "UNAVAILABLE" && states[2].state == "NOT_INUSE" {
		out = states[2].at.Sub(states[1].at)
	} else {
		t.Errorf("Custom:%s in Asterisk went %v, want NOT_INUSE, UNAVAILABLE, NOT_INUSE", name, states)
	}
	t.Logf("FIGURE drain %s: Retry-After %v: no OPTIONS for %.2f s after the 503, out of Asterisk's routing for %.2f s (Custom:%s UNAVAILABLE); "+
		"failures %d (total %d), phase %s",
		name, drainAsked, paused.Seconds(), out.Seconds(), name, c.Failures, c.FailuresTotal, c.Phase)
	// The next probe is due drainAsked after qualifyd read the 503, which
	// SIPp sent first; T bounds the scheduling.
	if paused < drainAsked || paused > drainAsked+sc.t {
		t.Errorf("%s probed %v after its 503, want %v after it", name, paused, drainAsked)
	}
	if c.Failures != 0 || c.FailuresTotal != 0 || c.Status != "Reachable" || !c.Routable {
		t.Errorf("%s after its drain: %+v, want Reachable, routable, no failure", name, c)
	}
}

// TestAsteriskDrainFailsOpen: a trunk held out of Asterisk's routing as
// draining (its peer answered qualifyd's OPTIONS 503 with Retry-After:
// 20) when qualifyd is killed: the README's dial plan routine
// (GoSub(qualifyd-trunk)) routes it again once the heartbeat is stale,
// failopen_after after the last beat, as for a down trunk, before the
// 20 s the peer asked for are up. About 10-15 s.
func TestAsteriskDrainFailsOpen(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("testdata", "sinks", "extensions.conf"))
	if err != nil {
		t.Fatal(err)
	}
	peer := newTracedPeer(t, trunkXML)
	lab := startCallLab(t, callTestScale, labOptions{
		dialplan: string(readme) + "\n[qualifyd-e2e]\nexten => _r.,1,GoSub(qualifyd-trunk,s,1(pbx07))\n" +
			" same => n,Set(DB(e2e/${EXTEN:1})=${GOSUB_RETVAL})\n same => n,Hangup()\n",
		sink: fmt.Sprintf("heartbeat_interval=1\nfailopen_after=%d\n", int(astFailOpenAfter/time.Second)),
	}, labTrunk{"pbx07", peer, ""})
	p := &pbx{ast: lab.ast}
	if got := p.routine(t); got != "0" {
		t.Fatalf("routine %s with the trunk up", got)
	}
	peer.swap(drainXML)
	began := lineStamp(t, lab.log.wait(t, astBound, "Contact pbx07/", "is draining (503 with Retry-After): out of routing for 20s"))
	eventually(t, astBound, "Custom:pbx07 UNAVAILABLE", func() bool { return lab.devstate("pbx07") == "UNAVAILABLE" })
	if got := p.routine(t); got != "1" {
		t.Fatalf("routine %s with the trunk draining and qualifyd alive", got)
	}
	killed := kill(t, lab.d)
	eventually(t, astBound, "fail-open", func() bool { return p.routine(t) == "0" })
	took := time.Since(killed)
	t.Logf("a draining trunk: the routine failed open %v after kill -9 (failopen_after %v, heartbeat 1 s), %v after the drain began",
		took.Round(10*time.Millisecond), astFailOpenAfter, time.Since(began).Round(10*time.Millisecond))
	if took > astFailOpenBound || time.Since(began) >= drainAsked {
		t.Fatalf("the routine failed open %v after the kill and %v after the drain began, want within %v and before %v",
			took, time.Since(began), astFailOpenBound, drainAsked)
	}
	if got := lab.devstate("pbx07"); got != "UNAVAILABLE" {
		t.Fatalf("Custom:pbx07 %s: the fail-open is the routine's, the state stays qualifyd's last", got)
	}
}
