package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestPanicRule holds the rule to its definition: more than threshold
// percent down, at least min destinations; exactly at the threshold is
// no panic; 100 never panics.
func TestPanicRule(t *testing.T) {
	for _, c := range []struct {
		threshold, min, down, size int
		want                       bool
	}{
		{50, 10, 5, 10, false}, // exactly 50%: not more
		{50, 10, 6, 10, true},
		{50, 10, 10, 10, true},
		{50, 10, 9, 9, false}, // too few destinations to tell
		{50, 10, 0, 0, false},
		{50, 1, 1, 1, true},
		{50, 10, 51, 100, true},
		{50, 10, 50, 100, false},
		{100, 10, 10, 10, false}, // never
		{100, 1, 1, 1, false},
		{1, 10, 1, 100, false}, // 1% is not more than 1%
		{1, 10, 2, 100, true},
		{70, 10, 7, 10, false},
		{70, 10, 8, 10, true},
	} {
		r := panicRule{threshold: c.threshold, min: c.min}
		if got := r.panics(c.down, c.size); got != c.want {
			t.Errorf("threshold %d%% min %d: %d of %d down: panics %v, want %v", c.threshold, c.min, c.down, c.size, got, c.want)
		}
	}
	if r := newPanicRule(pjsip.Panic{}); r != (panicRule{threshold: 50, min: 10, hold: 10}) {
		t.Errorf("zero rule %+v, want the defaults", r)
	}
}

// census builds a census of the AoRs aors (name -> contacts, qualify on)
// and has it observe their snapshots in src.
func testCensus(aors map[string][]string, src *fakeEngine) *census {
	c := &pjsip.Config{}
	on := &qualify.Policy{Frequency: time.Minute}
	for name, uris := range aors {
		c.AoRs = append(c.AoRs, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: uris, Policy: on}})
	}
	var k census
	k.reset(c)
	for name := range aors {
		a, _ := src.AoR(name)
		k.observe(&a, time.Time{})
	}
	return &k
}

func snapshots(aors map[string][]string) *fakeEngine {
	src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{}}
	for a, uris := range aors {
		for _, u := range uris {
			src.aors[a] = append(src.aors[a], engine.ContactSnapshot{AoR: a, URI: u, Status: qualify.Reachable})
		}
	}
	return src
}

// TestCensusCountsDestinations: ten AoRs on one PBX count once; a
// destination is down only when all its contacts are, and a latency-only
// contact never is; IP literals are written one way.
func TestCensusCountsDestinations(t *testing.T) {
	aors := map[string][]string{"pair": {"sip:a@[2001:DB8::1]", "sip:b@192.0.2.9:5070"}, "v6": {"sip:c@[2001:db8:0::1]:5060"}}
	for i := range 10 {
		aors[fmt.Sprintf("ext%d", i)] = []string{fmt.Sprintf("sip:%d@PBX.example.net", 100+i)}
	}
	src := snapshots(aors)
	k := testCensus(aors, src)
	if k.size() != 3 || k.out != 0 {
		t.Fatalf("%d destinations, %d down; want 3 (pbx.example.net:5060, [2001:db8::1]:5060, 192.0.2.9:5070), 0", k.size(), k.out)
	}
	observe := func(name string, st ...qualify.Status) {
		src.set(name, st...)
		a, _ := src.AoR(name)
		k.observe(&a, time.Time{})
	}
	for i := range 9 {
		observe(fmt.Sprintf("ext%d", i), qualify.Unreachable)
	}
	if k.out != 0 {
		t.Fatalf("%d down with one contact of the PBX still up", k.out)
	}
	observe("ext9", qualify.Unreachable)
	observe("pair", qualify.Unreachable, qualify.Reachable)
	if k.out != 1 {
		t.Fatalf("%d down, want the PBX alone ([2001:db8::1] still has v6's contact)", k.out)
	}
	observe("v6", qualify.Unreachable)
	if k.out != 2 {
		t.Fatalf("%d down, want the PBX and [2001:db8::1]", k.out)
	}
	observe("ext3", qualify.Reachable)
	observe("pair", qualify.Reachable, qualify.Reachable)
	observe("pair", qualify.Reachable, qualify.Reachable) // no change: counted once
	if k.out != 0 || len(k.sick) != 10 {
		t.Fatalf("%d down, %d contacts down; want 0 and 10 (9 of the PBX, v6)", k.out, len(k.sick))
	}
	src.mu.Lock()
	src.aors["ext3"][0].LatencyOnly = true
	src.mu.Unlock()
	observe("ext3", qualify.Unreachable)
	if k.out != 0 {
		t.Fatalf("a latency-only contact counted down")
	}
}

// trunks is a configuration of n AoRs trunk0.., each with one contact to
// its own carrier, and the sinks.
func trunks(n int, rule pjsip.Panic, sinks ...*pjsip.Sink) (*pjsip.Config, *fakeEngine) {
	c := &pjsip.Config{Panic: rule, Sinks: sinks}
	on := &qualify.Policy{Frequency: 59 * time.Second, Timeout: time.Second} // H = F + T = 60 s
	src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{}, policy: *on}
	for i := range n {
		name, uri := fmt.Sprintf("trunk%d", i), fmt.Sprintf("sip:carrier@192.0.2.%d", 10+i)
		c.AoRs = append(c.AoRs, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{uri}, Policy: on}})
		src.aors[name] = []engine.ContactSnapshot{{AoR: name, URI: uri}}
	}
	return c, src
}

// setTrunk sets trunk i's contact of src to st and tells g, as the
// engine's change events do.
func setTrunk(g *Group, src *fakeEngine, i int, st qualify.Status) {
	name := fmt.Sprintf("trunk%d", i)
	src.set(name, st)
	g.AoRChanged(name)
}

// notes records the Group's log lines.
type notes struct {
	mu    sync.Mutex
	lines []string
}

func (n *notes) notice(_ slog.Level, msg string, _ ...slog.Attr) {
	n.mu.Lock()
	n.lines = append(n.lines, msg)
	n.mu.Unlock()
}

// all returns every line.
func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.lines)
}

// matching returns the lines that start with prefix.
func (n *notes) matching(prefix string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, l := range n.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// devices returns the fake Asterisk's state of devices Custom:trunk0..n-1,
// "U" for UNAVAILABLE, "." for NOT_INUSE, "?" for none.
func devices(f *fakeManager, n int) string {
	var b strings.Builder
	for i := range n {
		switch f.get(f.vars, fmt.Sprintf("DEVICE_STATE(Custom:trunk%d)", i)) {
		case "UNAVAILABLE":
			b.WriteByte('U')
		case "NOT_INUSE":
			b.WriteByte('.')
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// amiTrunksUp runs a Group of 10 trunks under rule with an AMI sink on
// the strict fake Manager, every trunk Reachable; it returns the group,
// its source, the fake and the log.
func amiTrunksUp(t *testing.T, rule pjsip.Panic) (*Group, *fakeEngine, *fakeManager, *notes) {
	c, src := trunks(10, rule, amiSink())
	f := newFakeManager("s3cret")
	log := &notes{}
	g := NewGroup(Config{Source: src, Dial: f.dial, Notice: log.notice})
	g.Configure(c)
	runGroup(t, g)
	for i := range 10 {
		setTrunk(g, src, i, qualify.Reachable)
	}
	return g, src, f, log
}

// runGroup runs g until the test ends.
func runGroup(t *testing.T, g *Group) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestPanicPushesOnlyUps: 10 trunks to 10 carriers and an AMI sink (the
// strict fake). Four down is an outage: pushed. A minute later (longer
// than H) two more failing a first probe make a panic before either is
// down: what was down before the trouble stays down, the two going down later are held up, a recovery is pushed and
// a trunk down again is held (a seventh failing keeps the panic). Once the panic ends, a held trunk goes
// down only on a probe made after the end.
func TestPanicPushesOnlyUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, src, f, log := amiTrunksUp(t, pjsip.Panic{Threshold: 50, MinDestinations: 10, HoldThreshold: 50})
		for i := range 4 {
			setTrunk(g, src, i, qualify.Unreachable)
		}
		src.suspect("trunk4")
		g.AoRChanged("trunk4")
		synctest.Wait()
		if got := devices(f, 10); got != "UUUU......" || g.Panic().Active {
			t.Fatalf("devices %s, panic %+v: half failing is a real outage, pushed", got, g.Panic())
		}
		time.Sleep(61 * time.Second) // the four are down for longer than H = 60 s
		src.suspect("trunk5")
		g.AoRChanged("trunk5")
		p := g.Panic()
		if !p.Active || p.Failing != 6 || p.Down != 4 || p.Destinations != 10 {
			t.Fatalf("panic %+v: 6 of 10 failing is a panic", p)
		}
		time.Sleep(time.Second)
		src.suspect("trunk6")
		g.AoRChanged("trunk6")
		setTrunk(g, src, 4, qualify.Unreachable)
		setTrunk(g, src, 5, qualify.Unreachable)
		setTrunk(g, src, 0, qualify.Reachable) // a recovery
		setTrunk(g, src, 0, qualify.Unreachable)
		synctest.Wait()
		if got := devices(f, 10); got != ".UUU......" {
			t.Fatalf("devices %s during the panic: want trunks 1-3 down, the recovered trunk0 and the new downs up", got)
		}
		if st, _, _ := g.Objects("pbx"); st.Held != 3 || st.Pending != 0 {
			t.Fatalf("status %+v: want 3 held", st)
		}
		if got := log.matching("panic"); len(got) != 1 ||
			got[0] != "panic: 6 of 10 destinations are failing (4 down) (more than 50%), more likely a fault of qualifyd's own: the sinks push only ups until they are back (panic_threshold)" {
			t.Fatalf("log %q: want one entry line", got)
		}
		time.Sleep(time.Second)
		setTrunk(g, src, 6, qualify.Reachable)
		setTrunk(g, src, 1, qualify.Reachable) // 5 of 10: over
		if g.Panic().Active {
			t.Fatalf("5 of 10 failing is still a panic: %+v", g.Panic())
		}
		time.Sleep(10 * awaitEvery)
		synctest.Wait()
		if got := devices(f, 10); got != "..UU......" {
			t.Fatalf("devices %s after the panic: the held trunks wait for a new probe", got)
		}
		time.Sleep(time.Second)
		src.set("trunk4", qualify.Unreachable) // a probe after the end, no event: still down
		time.Sleep(awaitEvery)
		synctest.Wait()
		if got := devices(f, 10); got != "..UUU....." {
			t.Fatalf("devices %s: trunk4 confirmed down after the panic", got)
		}
		if got := log.matching("panic over"); len(got) != 1 || got[0] != "panic over: 5 of 10 destinations are failing (5 down) (at most 50%): the sinks push the verdicts again, a down held in the panic once a new probe confirms it" {
			t.Fatalf("log %q: want one exit line", got)
		}
	})
}

// TestPanicTakesBackItsOwnDowns: with qualify_failures=1 the first
// trunks of a blip go down before the share passes the lower mark; when
// the panic begins, a down whose streak began within H before it is part
// of the same event and is pushed up again (held until a probe after the
// panic confirms it), while a trunk down for longer than H stays down
// (qualify-semantics §6.1).
func TestPanicTakesBackItsOwnDowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, src, f, log := amiTrunksUp(t, pjsip.Panic{Threshold: 50, MinDestinations: 10, HoldThreshold: 90})
		setTrunk(g, src, 0, qualify.Unreachable) // dead before the trouble
		time.Sleep(61 * time.Second)             // longer than H = F + T = 60 s
		setTrunk(g, src, 1, qualify.Unreachable) // the blip's first, below the lower mark
		setTrunk(g, src, 2, qualify.Unreachable)
		synctest.Wait()
		if got := devices(f, 10); got != "UUU......." || g.Panic().Active {
			t.Fatalf("devices %s, panic %+v: three down of ten is an outage, pushed", got, g.Panic())
		}
		time.Sleep(5 * time.Second)
		for i := 3; i <= 5; i++ {
			src.suspect(fmt.Sprintf("trunk%d", i))
			g.AoRChanged(fmt.Sprintf("trunk%d", i))
		}
		synctest.Wait()
		if p := g.Panic(); !p.Active || p.TakenBack != 2 {
			t.Fatalf("panic %+v: 6 of 10 failing, two downs of its own event taken back", p)
		}
		if got := devices(f, 10); got != "U........." {
			t.Fatalf("devices %s in the panic: want trunk0 down, trunks 1 and 2 taken back", got)
		}
		if st, _, _ := g.Objects("pbx"); st.Held != 2 {
			t.Fatalf("status %+v: want the two taken back held", st)
		}
		if got := log.matching("panic:"); len(got) != 1 || !strings.HasSuffix(got[0], "; 2 downs of this event taken back (their streaks began within 1m0s)") {
			t.Fatalf("log %q: want the entry line with the two taken back", got)
		}
	})
}

// TestPanicNeverBelowItsPopulation: with fewer destinations than
// panic_min_destinations, or panic_threshold=100, a total outage is
// pushed down: a single trunk's backup route depends on it.
func TestPanicNeverBelowItsPopulation(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		rule  pjsip.Panic
		wantD string
	}{
		{"single trunk", 1, pjsip.Panic{}, "U"},
		{"nine of min ten", 9, pjsip.Panic{}, "UUUUUUUUU"},
		{"threshold 100", 10, pjsip.Panic{Threshold: 100, MinDestinations: 1}, "UUUUUUUUUU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conf, src := trunks(c.n, c.rule, amiSink())
				f := newFakeManager("s3cret")
				g := NewGroup(Config{Source: src, Dial: f.dial})
				g.Configure(conf)
				runGroup(t, g)
				for i := range c.n {
					setTrunk(g, src, i, qualify.Unreachable)
				}
				synctest.Wait()
				if got := devices(f, c.n); got != c.wantD || g.Panic().Active {
					t.Fatalf("devices %s, panic %+v", got, g.Panic())
				}
			})
		})
	}
}

// TestPanicCarriesToANewSink: a sink configured during a panic holds at
// once, and a reload recounts the destinations: one that ends the panic
// pushes a held down once a probe made after the end confirms it.
func TestPanicCarriesToANewSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, src := trunks(10, pjsip.Panic{}, amiSink())
		for i := range 10 {
			src.set(fmt.Sprintf("trunk%d", i), qualify.Unreachable)
		}
		f := newFakeManager("s3cret")
		g := NewGroup(Config{Source: src, Dial: f.dial})
		g.Configure(c)
		runGroup(t, g)
		synctest.Wait()
		if got := devices(f, 10); got != ".........." || !g.Panic().Active {
			t.Fatalf("devices %s, panic %+v: all down at start is a panic", got, g.Panic())
		}
		s := amiSink()
		s.DevicePrefix = "Trunk:"
		c2, _ := trunks(10, pjsip.Panic{}, s)
		g.Configure(c2)
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Trunk:trunk3)"); got != "NOT_INUSE" {
			t.Fatalf("the new sink pushed %q during the panic", got)
		}
		time.Sleep(time.Second)
		c3, _ := trunks(10, pjsip.Panic{Threshold: 100}, s)
		g.Configure(c3)
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Trunk:trunk3)"); got != "NOT_INUSE" || g.Panic().Active {
			t.Fatalf("panic_threshold=100 by reload: device %q, panic %+v: pushed down on the panic's evidence", got, g.Panic())
		}
		time.Sleep(time.Second)
		src.set("trunk3", qualify.Unreachable)
		time.Sleep(awaitEvery)
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Trunk:trunk3)"); got != "UNAVAILABLE" {
			t.Fatalf("panic_threshold=100 by reload: device %q, panic %+v", got, g.Panic())
		}
	})
}

// TestRemovedSinkReleases: a sink removed from the file, or whose router
// changes, pushes up what it holds down (not what the router confirmed
// up), says how many, and stops.
func TestRemovedSinkReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, src := trunks(3, pjsip.Panic{}, amiSink())
		src.set("trunk0", qualify.Unreachable)
		src.set("trunk1", qualify.Unreachable)
		src.set("trunk2", qualify.Reachable)
		old, other := newFakeManager("s3cret"), newFakeManager("s3cret")
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == "other:5038" {
				return other.dial(ctx, network, addr)
			}
			return old.dial(ctx, network, addr)
		}
		var log notes
		g := NewGroup(Config{Source: src, Dial: dial, Notice: log.notice})
		g.Configure(c)
		runGroup(t, g)
		synctest.Wait()
		if got := devices(old, 3); got != "UU." {
			t.Fatalf("devices %s", got)
		}
		moved := amiSink()
		moved.Address = "other:5038"
		c2, _ := trunks(3, pjsip.Panic{}, moved)
		g.Configure(c2)
		synctest.Wait()
		if got, now := devices(old, 3), devices(other, 3); got != "..." || now != "UU." {
			t.Fatalf("old router %s, new router %s: the old one must be released", got, now)
		}
		if got := log.matching("sink pbx: stopped"); !slices.Equal(got, []string{"sink pbx: stopped: released 2 objects the router may hold down (pushed up)"}) {
			t.Fatalf("log %q", got)
		}
		c3, _ := trunks(3, pjsip.Panic{})
		g.Configure(c3)
		synctest.Wait()
		if got := devices(other, 3); got != "..." {
			t.Fatalf("removed sink left %s", got)
		}
		if len(g.Status()) != 0 || len(log.matching("sink pbx: stopped")) != 2 {
			t.Fatalf("status %+v, log %q", g.Status(), log.lines)
		}
	})
}

// TestReleaseIsBoundedByTheTimeout: a removed sink whose router does not
// answer gives up after its timeout, and says so.
func TestReleaseIsBoundedByTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, src := trunks(2, pjsip.Panic{}, amiSink())
		src.set("trunk0", qualify.Unreachable)
		src.set("trunk1", qualify.Unreachable)
		f := newFakeManager("s3cret")
		up := true
		var mu sync.Mutex
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			defer mu.Unlock()
			if !up {
				return nil, fmt.Errorf("dial tcp %s: connection refused", addr)
			}
			return f.dial(ctx, network, addr)
		}
		var log notes
		g := NewGroup(Config{Source: src, Dial: dial, Notice: log.notice})
		g.Configure(c)
		runGroup(t, g)
		synctest.Wait()
		mu.Lock()
		up = false
		mu.Unlock()
		c2, _ := trunks(2, pjsip.Panic{})
		g.Configure(c2)
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		if got := log.matching("sink pbx: stopped"); len(got) != 0 {
			t.Fatalf("log %q before the timeout", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		got := log.matching("sink pbx: stopped")
		if len(got) != 1 || got[0] != "sink pbx: stopped: released 0 objects the router may hold down (pushed up); 2 not confirmed within 5s: ami pbx:5038: dial tcp pbx:5038: connection refused" {
			t.Fatalf("log %q", got)
		}
	})
}

// TestReleaseSetsEveryObjectUp is `qualifyd release` against a fake
// Kamailio 5.6 and a webhook receiver: every dispatcher destination of
// the sink is set active, whatever it held (the inactive one first), and
// the receiver hears every object removed; only the sinks named are
// touched.
func TestReleaseSetsEveryObjectUp(t *testing.T) {
	f, srv := newFakeDispatcher(t)
	var mu sync.Mutex
	var hooked []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c Change
		json.NewDecoder(r.Body).Decode(&c)
		mu.Lock()
		hooked = append(hooked, c.Kind+" "+c.AoR+" "+c.To)
		mu.Unlock()
	}))
	defer hook.Close()
	on := &qualify.Policy{Frequency: time.Minute}
	conf := &pjsip.Config{
		AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "a", Contacts: []string{"sip:127.0.0.1:5080"}, Policy: on}},
			{AoR: probe.AoR{Name: "b", Contacts: []string{"sip:192.0.2.10"}, Policy: on}}},
		Sinks: []*pjsip.Sink{{Name: "edge", Driver: "kamailio", URL: srv.URL + "/RPC", Timeout: 5 * time.Second},
			{Name: "hook", Driver: "webhook", URL: hook.URL, Timeout: 5 * time.Second}},
	}
	out, err := Release(t.Context(), conf, []string{"edge"}, Config{})
	if err != nil || len(out) != 1 || out[0] != (Released{Name: "edge", Driver: "kamailio", Objects: 2, Released: 2, Downs: 1}) {
		t.Fatalf("release %+v, %v", out, err)
	}
	if f.flags("sip:192.0.2.10:5060") != "AX" || f.flags("sip:127.0.0.1:5080") != "AX" {
		t.Fatalf("flags %s %s, want both active", f.flags("sip:192.0.2.10:5060"), f.flags("sip:127.0.0.1:5080"))
	}
	if len(hooked) != 0 {
		t.Fatalf("the webhook, not named, got %q", hooked)
	}
	if out, err = Release(t.Context(), conf, nil, Config{}); err != nil || len(out) != 2 || out[1].Released != 4 {
		t.Fatalf("release all %+v, %v", out, err)
	}
	slices.Sort(hooked)
	if want := []string{"aor a removed", "aor b removed", "contact a removed", "contact b removed"}; !slices.Equal(hooked, want) {
		t.Fatalf("webhook got %q, want %q", hooked, want)
	}
	if _, err := Release(t.Context(), conf, []string{"edge", "nope"}, Config{}); err == nil || err.Error() != `no sink named "nope"` {
		t.Fatalf("unknown sink: %v", err)
	}
}

// TestPanicSetsKamailioActive: in a panic a kamailio sink (against the
// fake Kamailio 5.6) takes back a destination set inactive by the same
// event, and keeps one that fails meanwhile active; after it, each is set
// inactive once a probe made after the end confirms it.
func TestPanicSetsKamailioActive(t *testing.T) {
	f, srv := newFakeDispatcher(t)
	def := &pjsip.Sink{Name: "edge", Driver: "kamailio", URL: srv.URL + "/RPC", Timeout: 5 * time.Second}
	c, src := trunks(10, pjsip.Panic{}, def)
	c.AoRs[0].Contacts = []string{"sip:127.0.0.1:5080"} // the fake's two destinations
	c.AoRs[1].Contacts = []string{"sip:192.0.2.10"}
	src.aors["trunk0"][0].URI, src.aors["trunk1"][0].URI = "sip:127.0.0.1:5080", "sip:192.0.2.10"
	g := NewGroup(Config{Source: src})
	g.Configure(c)
	for i := range 10 {
		setTrunk(g, src, i, qualify.Reachable)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	const trunk0, trunk1 = "sip:127.0.0.1:5080", "sip:192.0.2.10:5060"
	settle(t, f, map[string]byte{trunk0: 'A', trunk1: 'A'}) // the connect pushes every level
	setTrunk(g, src, 0, qualify.Unreachable)
	settle(t, f, map[string]byte{trunk0: 'I', trunk1: 'A'}) // one trunk down is pushed
	for i := 2; i <= 6; i++ {
		src.suspect(fmt.Sprintf("trunk%d", i))
		g.AoRChanged(fmt.Sprintf("trunk%d", i))
	}
	if !g.Panic().Active {
		t.Fatalf("6 of 10 failing is no panic: %+v", g.Panic())
	}
	// trunk0's streak began within H before the panic: its down is of the
	// same event, taken back.
	settle(t, f, map[string]byte{trunk0: 'A', trunk1: 'A'})
	setTrunk(g, src, 1, qualify.Unreachable)
	held := func() ObjectState {
		_, objs, _ := g.Objects("edge")
		for _, o := range objs {
			if o.Name == "192.0.2.10:5060" {
				return o
			}
		}
		return ObjectState{}
	}
	if o := held(); !o.Held || o.Want != Up {
		t.Fatalf("trunk1's destination %+v: want held up in the panic", o)
	}
	for i := 2; i <= 6; i++ {
		setTrunk(g, src, i, qualify.Reachable)
	}
	if g.Panic().Active {
		t.Fatalf("2 of 10 failing is still a panic: %+v", g.Panic())
	}
	if o := held(); !o.Held {
		t.Fatalf("trunk1's destination %+v: want held until a new probe", o)
	}
	settle(t, f, map[string]byte{trunk0: 'A', trunk1: 'A'})
	for _, name := range []string{"trunk0", "trunk1"} {
		src.set(name, qualify.Unreachable) // a probe sent after the end, timed out T later
		src.mu.Lock()
		src.aors[name][0].Last.At = time.Now().Add(src.policy.ProbeTimeout())
		src.mu.Unlock()
		g.AoRChanged(name)
	}
	settle(t, f, map[string]byte{trunk0: 'I', trunk1: 'I'})
}

// settle takes f's set_state notices until every destination's state
// (the first letter of its flags) is the one wanted; the bound only stops
// a broken run. The order of the pushes is not the test's concern: the
// reconciler takes its objects in no set order.
func settle(t *testing.T, f *fakeDispatcher, want map[string]byte) {
	t.Helper()
	bound := time.After(10 * time.Second)
	for {
		ok := true
		for uri, state := range want {
			if fl := f.flags(uri); fl == "" || fl[0] != state {
				ok = false
			}
		}
		if ok {
			return
		}
		select {
		case <-f.set:
		case <-bound:
			t.Fatalf("destinations %s %s, %s %s; want %q", "127.0.0.1:5080", f.flags("sip:127.0.0.1:5080"), "192.0.2.10", f.flags("sip:192.0.2.10:5060"), want)
		}
	}
}

// liveTrunks runs a group of n trunks (see trunks) under rule with an AMI
// sink (the strict fake), every trunk Reachable.
func liveTrunks(t *testing.T, n int, rule pjsip.Panic) (*Group, *fakeEngine, *fakeManager) {
	return clockedTrunks(t, n, rule, Clock{})
}

// clockedTrunks is liveTrunks on clock.
func clockedTrunks(t *testing.T, n int, rule pjsip.Panic, clock Clock) (*Group, *fakeEngine, *fakeManager) {
	c, src := trunks(n, rule, amiSink())
	f := newFakeManager("s3cret")
	g := NewGroup(Config{Source: src, Dial: f.dial, Clock: clock})
	g.Configure(c)
	runGroup(t, g)
	for i := range n {
		setTrunk(g, src, i, qualify.Reachable)
	}
	return g, src, f
}

// siteFails takes trunks 0-9 of src through a first failed probe to
// Unreachable, telling g each step: 0-2 go down while at most 3 fail
// (10% of 30), 3-9 once all 10 do.
func siteFails(g *Group, src *fakeEngine) {
	for i := range 10 {
		src.suspect(fmt.Sprintf("trunk%d", i))
		g.AoRChanged(fmt.Sprintf("trunk%d", i))
		if i == 2 {
			for j := range 3 {
				setTrunk(g, src, j, qualify.Unreachable)
			}
		}
	}
	for i := 3; i < 10; i++ {
		setTrunk(g, src, i, qualify.Unreachable)
	}
}

// TestPanicLetsAThirdGoDown: a genuine outage of a third of 30
// destinations (a carrier's site), each failing its first probe and then
// going down, makes no panic; above the lower mark (10%) each Down waits
// for one, pushed Up, and reaches the router when its wait ends: the
// longest F + T of the qualified AoRs (60 s here) after its verdict
// (TestPanicWaitEndsOnTime: not a second later). The three that went
// down while at most 10% failed are pushed at once.
func TestPanicLetsAThirdGoDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, src, f := liveTrunks(t, 30, pjsip.Panic{})
		siteFails(g, src)
		synctest.Wait()
		p := g.Panic()
		if got, want := devices(f, 30), "UUU"+strings.Repeat(".", 27); got != want || p.Active || !p.Waiting || p.Hold != time.Minute {
			t.Fatalf("devices %s, panic %+v: want 3 down at once, 7 waiting up to 60 s", got, p)
		}
		if st, _, _ := g.Objects("pbx"); st.Held != 7 {
			t.Fatalf("status %+v: want 7 held", st)
		}
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if got := devices(f, 30); got != "UUU"+strings.Repeat(".", 27) {
			t.Fatalf("devices %s before the wait is over", got)
		}
		time.Sleep(awaitEvery)
		synctest.Wait()
		if got, want := devices(f, 30), strings.Repeat("U", 10)+strings.Repeat(".", 20); got != want || g.Panic().Active {
			t.Fatalf("devices %s, panic %+v: want the third down once its wait is over", got, g.Panic())
		}
	})
}

// TestPanicWaitEndsOnTime: a Down held by the lower mark reaches the
// router when its wait (H, 60 s here) ends, not at the next look at the
// awaited objects: held half a second after such a look, it is pushed at
// H after its verdict, with no Set or probe in between.
func TestPanicWaitEndsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, src, f := liveTrunks(t, 30, pjsip.Panic{})
		time.Sleep(awaitEvery / 2)
		siteFails(g, src)
		synctest.Wait()
		if got, want := devices(f, 30), "UUU"+strings.Repeat(".", 27); got != want || !g.Panic().Waiting {
			t.Fatalf("devices %s, panic %+v: want 3 down at once, 7 waiting", got, g.Panic())
		}
		held := time.Now()
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if got := devices(f, 30); got != "UUU"+strings.Repeat(".", 27) {
			t.Fatalf("devices %s before the wait is over", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, want := devices(f, 30), strings.Repeat("U", 10)+strings.Repeat(".", 20); got != want {
			t.Fatalf("devices %s %v after the verdicts: want the seven pushed when their wait (60 s) ends", got, time.Since(held))
		}
	})
}

// TestPanicSingleTrunkNotDelayed: among 10 destinations, one trunk
// failing is 10%, not above the lower mark: its Down is pushed at once,
// and so is one at panic_hold_threshold=100, above any share.
func TestPanicSingleTrunkNotDelayed(t *testing.T) {
	for _, hold := range []int{0, 100} {
		synctest.Test(t, func(t *testing.T) {
			g, src, f := liveTrunks(t, 10, pjsip.Panic{HoldThreshold: hold})
			n := 1
			if hold == 100 {
				n = 5
			}
			for i := range n {
				src.suspect(fmt.Sprintf("trunk%d", i))
				g.AoRChanged(fmt.Sprintf("trunk%d", i))
			}
			for i := range n {
				setTrunk(g, src, i, qualify.Unreachable)
			}
			synctest.Wait()
			if got, want := devices(f, 10), strings.Repeat("U", n)+strings.Repeat(".", 10-n); got != want || g.Panic().Waiting {
				t.Fatalf("panic_hold_threshold %d: devices %s, panic %+v: want %d down at once", hold, got, g.Panic(), n)
			}
		})
	}
}

// fail takes trunks from..to-1 of src through a first failed probe to
// Unreachable, telling g each step.
func fail(g *Group, src *fakeEngine, from, to int) {
	for i := from; i < to; i++ {
		src.suspect(fmt.Sprintf("trunk%d", i))
		g.AoRChanged(fmt.Sprintf("trunk%d", i))
	}
	for i := from; i < to; i++ {
		setTrunk(g, src, i, qualify.Unreachable)
	}
}

// TestPanicLongDeadDoNotHoldANewDown: among 50 destinations, 5 (10%)
// failing for longer than the wait (60 s) do not count towards the lower
// mark, so a single trunk's new Down is pushed at once; the downs of a
// share then rising past the mark (6 of 50 failing within the wait,
// each from its first failed probe) still wait.
func TestPanicLongDeadDoNotHoldANewDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, src, f := liveTrunks(t, 50, pjsip.Panic{})
		fail(g, src, 0, 5)
		synctest.Wait()
		if got, want := devices(f, 50), strings.Repeat("U", 5)+strings.Repeat(".", 45); got != want || g.Panic().Waiting {
			t.Fatalf("devices %s, panic %+v: want 5 down at once (10%%)", got, g.Panic())
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if p := g.Panic(); p.Failing != 5 || p.Recent != 0 || p.Waiting {
			t.Fatalf("panic %+v a wait later: want 5 failing, none recently", p)
		}
		fail(g, src, 5, 6)
		synctest.Wait()
		if got, want := devices(f, 50), strings.Repeat("U", 6)+strings.Repeat(".", 44); got != want || g.Panic().Waiting {
			t.Fatalf("devices %s, panic %+v: want the new down pushed at once", got, g.Panic())
		}
		fail(g, src, 6, 11)
		synctest.Wait()
		if got, want := devices(f, 50), strings.Repeat("U", 6)+strings.Repeat(".", 44); got != want || !g.Panic().Waiting || g.Panic().Recent != 6 {
			t.Fatalf("devices %s, panic %+v: want 6 of 50 recently failing, their downs waiting", got, g.Panic())
		}
		if st, _, _ := g.Objects("pbx"); st.Held != 5 {
			t.Fatalf("status %+v: want 5 held", st)
		}
	})
}

// TestPanicFailingAgainIsRecent: a destination failing for longer than
// the wait that recovers and fails again begins a new streak, counted
// recently failing: with it, 2 of 10 are, and the next down waits.
func TestPanicFailingAgainIsRecent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, src, f := liveTrunks(t, 10, pjsip.Panic{})
		fail(g, src, 0, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		if p := g.Panic(); p.Failing != 1 || p.Recent != 0 {
			t.Fatalf("panic %+v: want trunk0 failing, not recently", p)
		}
		setTrunk(g, src, 0, qualify.Reachable)
		fail(g, src, 0, 1)
		if p := g.Panic(); p.Failing != 1 || p.Recent != 1 || p.Waiting {
			t.Fatalf("panic %+v: want trunk0 recently failing again, 10%%", p)
		}
		fail(g, src, 1, 2)
		synctest.Wait()
		if got := devices(f, 10); got != "U........." || !g.Panic().Waiting {
			t.Fatalf("devices %s, panic %+v: want trunk1's down waiting, 2 of 10 recently failing", got, g.Panic())
		}
	})
}

// TestCensusAgesStreaks: the census counts a destination recently
// failing from the beginning of its streak until wait later, whatever
// the order of its recoveries; a recount (a reload, a resync) keeps a
// failing destination's streak.
func TestCensusAgesStreaks(t *testing.T) {
	conf, src := trunks(10, pjsip.Panic{})
	var k census
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	k.recount(conf, src.AoR, t0)
	observe := func(name string, at time.Time, st ...qualify.Status) {
		if st == nil {
			src.suspect(name)
		} else {
			src.set(name, st...)
		}
		a, _ := src.AoR(name)
		k.observe(&a, at)
	}
	check := func(step string, failing, recent int) {
		t.Helper()
		if k.failing != failing || k.recent != recent {
			t.Fatalf("%s: %d failing, %d recently; want %d, %d", step, k.failing, k.recent, failing, recent)
		}
	}
	const wait = time.Minute
	observe("trunk0", t0)
	observe("trunk1", t0.Add(10*time.Second))
	k.age(t0.Add(wait-time.Nanosecond), wait)
	check("before the wait", 2, 2)
	k.age(t0.Add(wait), wait)
	check("trunk0 a wait later", 2, 1)
	t1 := t0.Add(2 * wait)
	observe("trunk0", t1, qualify.Reachable)
	observe("trunk0", t1)
	observe("trunk2", t1)
	observe("trunk2", t1, qualify.Reachable)
	observe("trunk2", t1)
	k.age(t1, wait)
	check("trunk1 aged, trunk0 and trunk2 failing anew", 3, 2)
	k.recount(conf, src.AoR, t1.Add(time.Second))
	check("recounted", 3, 2)
	k.age(t1.Add(wait), wait)
	check("a wait after the new streaks", 3, 0)
	if len(k.begun) != 0 || len(k.since) != 3 {
		t.Fatalf("%d beginnings queued, %d streaks; want 0, 3", len(k.begun), len(k.since))
	}
	// A contact's Down half a wait after its first failed probe goes on
	// with the streak its first failure began.
	t2 := t1.Add(2 * wait)
	observe("trunk3", t2)
	observe("trunk3", t2.Add(wait/2), qualify.Unreachable)
	check("trunk3 failing, then down", 4, 1)
	k.age(t2.Add(wait), wait)
	check("a wait after trunk3's first failure", 4, 0)
	if k.out != 1 || len(k.begun) != 0 {
		t.Fatalf("%d destinations down, %d beginnings queued; want 1, 0", k.out, len(k.begun))
	}
}

// TestCensusCountsFailing: a destination is failing from its contacts'
// first failed probe (all of them), down included, and healthy again
// when a success clears the run; a latency-only contact never fails.
func TestCensusCountsFailing(t *testing.T) {
	aors := map[string][]string{"a": {"sip:a@192.0.2.1"}, "b": {"sip:b@192.0.2.1"}, "c": {"sip:c@192.0.2.2"}}
	src := snapshots(aors)
	k := testCensus(aors, src)
	observe := func(name string) { a, _ := src.AoR(name); k.observe(&a, time.Time{}) }
	src.suspect("a")
	observe("a")
	if k.failing != 0 {
		t.Fatalf("%d failing with b still healthy on 192.0.2.1", k.failing)
	}
	src.set("b", qualify.Unreachable)
	observe("b")
	src.suspect("c")
	observe("c")
	if k.failing != 2 || k.out != 0 {
		t.Fatalf("%d failing, %d down; want 2 (a suspect and b down on .1, c suspect), 0", k.failing, k.out)
	}
	src.set("a", qualify.Unreachable)
	observe("a")
	src.set("c", qualify.Reachable)
	observe("c")
	if k.failing != 1 || k.out != 1 || len(k.sick) != 2 {
		t.Fatalf("%d failing, %d down, %d sick; want 1, 1, 2", k.failing, k.out, len(k.sick))
	}
	src.mu.Lock()
	src.aors["c"][0].LatencyOnly = true
	src.mu.Unlock()
	src.suspect("c")
	observe("c")
	if k.failing != 1 {
		t.Fatalf("a latency-only contact counted failing")
	}
}

// TestPanicWaitFollowsAReload: a reload that changes the lower mark's
// wait (H, from 60 s to 30 s or 90 s) moves the end of every wait already
// running: a Down held half a second after a look at the awaited
// objects reaches the router when the new wait ends after its verdict,
// not at the next look after it.
func TestPanicWaitFollowsAReload(t *testing.T) {
	for _, h := range []time.Duration{30 * time.Second, 90 * time.Second} {
		t.Run(h.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g, src, f := liveTrunks(t, 30, pjsip.Panic{})
				time.Sleep(awaitEvery / 2)
				siteFails(g, src)
				synctest.Wait()
				held := time.Now()
				if got, want := devices(f, 30), "UUU"+strings.Repeat(".", 27); got != want || !g.Panic().Waiting {
					t.Fatalf("devices %s, panic %+v: want 3 down at once, 7 waiting", got, g.Panic())
				}
				time.Sleep(10 * time.Second)
				c, _ := trunks(30, pjsip.Panic{}, amiSink())
				for i := range c.AoRs {
					c.AoRs[i].Policy = &qualify.Policy{Frequency: h - time.Second, Timeout: time.Second}
				}
				g.Configure(c)
				synctest.Wait()
				if p := g.Panic(); p.Hold != h {
					t.Fatalf("panic %+v: want the wait %v after the reload", p, h)
				}
				time.Sleep(h - time.Since(held) - time.Millisecond)
				synctest.Wait()
				if got := devices(f, 30); got != "UUU"+strings.Repeat(".", 27) {
					t.Fatalf("devices %s %v after the verdicts, before the new wait (%v) is over", got, time.Since(held), h)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if got, want := devices(f, 30), strings.Repeat("U", 10)+strings.Repeat(".", 20); got != want {
					t.Fatalf("devices %s %v after the verdicts: want the seven pushed when the new wait (%v) ends", got, time.Since(held), h)
				}
			})
		})
	}
}
