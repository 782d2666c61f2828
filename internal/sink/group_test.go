package sink

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// fakeEngine is a Source whose contacts the test sets; its snapshots
// carry policy, as the engine's carry their AoR's.
type fakeEngine struct {
	mu     sync.Mutex
	aors   map[string][]engine.ContactSnapshot
	policy qualify.Policy
}

func (f *fakeEngine) AoR(name string) (engine.AoRSnapshot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs, ok := f.aors[name]
	return engine.AoRSnapshot{Name: name, Contacts: append([]engine.ContactSnapshot(nil), cs...), Policy: f.policy}, ok
}

// set gives the contacts of aor the statuses st, each the verdict of a
// probe that ended now.
func (f *fakeEngine) set(aor string, st ...qualify.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.aors[aor]
	for i := range cs {
		cs[i].Status, cs[i].Last.At, cs[i].Phase, cs[i].Failures = st[i], time.Now(), qualify.Healthy, 0
		if st[i] == qualify.Unreachable {
			cs[i].Phase = qualify.Down
		}
	}
}

// suspect gives aor's contacts a first failed probe that ended now: the
// census counts them failing, the sinks still up.
func (f *fakeEngine) suspect(aor string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.aors[aor] {
		c := &f.aors[aor][i]
		c.Phase, c.Failures, c.Last.At = qualify.Suspect, 1, time.Now()
	}
}

func conf(aors map[string][]string, eps []pjsip.Endpoint, sinks ...*pjsip.Sink) *pjsip.Config {
	c := &pjsip.Config{Endpoints: eps, Sinks: sinks}
	on := &qualify.Policy{Frequency: time.Minute}
	for _, name := range []string{"pbx07", "pbx08", "pbx09", "trunk"} {
		if uris, ok := aors[name]; ok {
			c.AoRs = append(c.AoRs, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: uris, Policy: on}})
		}
	}
	return c
}

func amiSink() *pjsip.Sink {
	return &pjsip.Sink{Name: "pbx", Driver: "ami", Address: "pbx:5038", Username: "qualifyd", Secret: "s3cret",
		Auth: "md5", DevicePrefix: "Custom:", Method: "devstate", Timeout: 5 * time.Second}
}

func TestGroupFollowsTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aors := map[string][]string{"pbx07": {"sip:a@192.0.2.7", "sip:b@192.0.2.8"}, "pbx08": {"sip:192.0.2.9"}, "trunk": {"sip:192.0.2.10"}}
		src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{}}
		for a, uris := range aors {
			for _, u := range uris {
				src.aors[a] = append(src.aors[a], engine.ContactSnapshot{AoR: a, URI: u})
			}
		}
		f := newFakeManager("s3cret")
		g := NewGroup(Config{Source: src, Dial: f.dial})
		eps := []pjsip.Endpoint{{Name: "pbx07", AoRs: []string{"pbx07", "pbx08"}}}
		g.Configure(conf(aors, eps, amiSink()))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { g.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		if n := len(f.vars); n != 0 {
			t.Fatalf("pushed %v before any verdict", f.vars)
		}
		src.set("pbx07", qualify.Unreachable, qualify.Unreachable)
		g.AoRChanged("pbx07")
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "NOT_INUSE" {
			t.Fatalf("pbx07 is %q: pbx08 has no verdict yet, and NonQualified is routable", got)
		}
		src.set("pbx08", qualify.Unreachable)
		src.set("trunk", qualify.Reachable)
		g.AoRChanged("pbx08")
		g.AoRChanged("trunk")
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "UNAVAILABLE" {
			t.Fatalf("endpoint pbx07 is %q", got)
		}
		if got := f.get(f.vars, "DEVICE_STATE(Custom:trunk)"); got != "NOT_INUSE" {
			t.Fatalf("trunk is %q", got)
		}
		// A reload drops the endpoint: its device is pushed up once and forgotten.
		g.Configure(conf(aors, nil, amiSink()))
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "UNAVAILABLE" {
			t.Fatalf("the AoR pbx07 (now unlisted) is %q", got)
		}
		st := g.Status()
		if len(st) != 1 || st[0].Name != "pbx" || st[0].Driver != "ami" || st[0].Objects != 3 || st[0].Pending != 0 || !st[0].Up {
			t.Fatalf("status %+v", st)
		}
		g.Configure(conf(map[string][]string{"trunk": aors["trunk"]}, nil, amiSink()))
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "NOT_INUSE" {
			t.Fatalf("the removed AoR pbx07 is %q, want it pushed up", got)
		}
		if st := g.Status(); st[0].Objects != 1 {
			t.Fatalf("status %+v", st)
		}
	})
}

func TestGroupReplacesAChangedSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aors := map[string][]string{"pbx07": {"sip:192.0.2.7"}}
		src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{"pbx07": {{URI: "sip:192.0.2.7", Status: qualify.Unreachable}}}}
		f := newFakeManager("s3cret")
		g := NewGroup(Config{Source: src, Dial: f.dial})
		g.Configure(conf(aors, nil, amiSink()))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { g.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		s := amiSink()
		s.AoRs = []string{}
		g.Configure(conf(aors, nil, s)) // follows nothing now
		synctest.Wait()
		if f.dials != 2 {
			t.Fatalf("%d dials: want the changed sink reconnected", f.dials)
		}
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "NOT_INUSE" {
			t.Fatalf("pbx07 is %q: the new sink must retire what the old one pushed", got)
		}
	})
}

// TestGroupRunsAgainWithoutReleasing: a group whose Run ended (a cluster
// node that stopped leading) pushes nothing, not even the release of a
// sink a reload removes, and a second Run pushes the levels wanted
// meanwhile.
func TestGroupRunsAgainWithoutReleasing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aors := map[string][]string{"trunk": {"sip:192.0.2.10"}}
		src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{"trunk": {{AoR: "trunk", URI: "sip:192.0.2.10"}}}}
		f := newFakeManager("s3cret")
		g := NewGroup(Config{Source: src, Dial: f.dial})
		g.Configure(conf(aors, nil, amiSink()))
		run := func() func() { return startRun(t, g) }
		stop := run()
		src.set("trunk", qualify.Unreachable)
		g.AoRChanged("trunk")
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:trunk)"); got != "UNAVAILABLE" {
			t.Fatalf("trunk is %q while running", got)
		}
		stop()
		src.set("trunk", qualify.Reachable)
		g.AoRChanged("trunk")
		g.Configure(conf(aors, nil)) // the sink removed while stopped
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:trunk)"); got != "UNAVAILABLE" {
			t.Fatalf("trunk is %q: a stopped group pushed (or released)", got)
		}
		g.Configure(conf(aors, nil, amiSink()))
		stop = run()
		defer stop()
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:trunk)"); got != "NOT_INUSE" {
			t.Fatalf("trunk is %q after Run again, want the level wanted meanwhile", got)
		}
	})
}

// slowClose is a connection whose Close waits until open is closed: a
// sink loop that takes its time to stop.
type slowClose struct {
	net.Conn
	open chan struct{}
}

func (c slowClose) Close() error { <-c.open; return c.Conn.Close() }

// TestGroupReconfiguredWhileItStops: a reload that removes a sink while
// Run stops the loops (a lost lease, a shutdown) neither crashes nor
// releases anything, and Run returns once the loops have stopped.
func TestGroupReconfiguredWhileItStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aors := map[string][]string{"trunk": {"sip:192.0.2.10"}}
		src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{"trunk": {{AoR: "trunk", URI: "sip:192.0.2.10", Status: qualify.Unreachable}}}}
		f := newFakeManager("s3cret")
		open := make(chan struct{})
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := f.dial(ctx, network, addr)
			return slowClose{c, open}, err
		}
		g := NewGroup(Config{Source: src, Dial: dial})
		g.Configure(conf(aors, nil, amiSink()))
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan struct{})
		go func() { g.Run(ctx); close(ran) }()
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:trunk)"); got != "UNAVAILABLE" {
			t.Fatalf("trunk is %q while running", got)
		}
		cancel()
		synctest.Wait() // Run waits for the loop, which waits in Close
		crashed := make(chan any, 1)
		reloaded := make(chan struct{})
		go func() {
			defer close(reloaded)
			defer func() { crashed <- recover() }()
			g.Configure(conf(aors, nil)) // the sink removed while its loop stops
		}()
		synctest.Wait()
		close(open)
		<-reloaded
		<-ran
		if p := <-crashed; p != nil {
			t.Fatalf("Configure while Run stopped the loops: %v", p)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:trunk)"); got != "UNAVAILABLE" {
			t.Fatalf("trunk is %q: a stopping group released the removed sink", got)
		}
	})
}

// TestGroupWebhookReassertsAtEachRun: a webhook that delivered up in an
// earlier Run (term) delivers it again at the next, though it wants what
// it delivered: another node may have delivered down meanwhile (a leader
// that died before the recovery reached the receiver).
func TestGroupWebhookReassertsAtEachRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aors := map[string][]string{"trunk": {"sip:192.0.2.10"}}
		src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{"trunk": {{AoR: "trunk", URI: "sip:192.0.2.10"}}}}
		g := NewGroup(Config{Source: src})
		g.Configure(conf(aors, nil, &pjsip.Sink{Name: "hook", Driver: "webhook", URL: "http://receiver/hook", Timeout: 5 * time.Second}))
		rc, wh := newDirect(t, "")
		g.sinks[0].rec.drv = wh
		run := func() func() { return startRun(t, g) }
		delivered := func() (to []string) {
			for {
				select {
				case c := <-rc.got:
					if c.Kind == "contact" {
						to = append(to, c.From+">"+c.To)
					}
				default:
					return to
				}
			}
		}
		stop := run()
		src.set("trunk", qualify.Reachable)
		g.AoRChanged("trunk")
		synctest.Wait()
		if got := delivered(); len(got) != 1 || got[0] != ">up" {
			t.Fatalf("first term delivered %v, want [>up]", got)
		}
		stop()
		// Another node leads: the trunk goes down and back.
		src.set("trunk", qualify.Unreachable)
		g.AoRChanged("trunk")
		src.set("trunk", qualify.Reachable)
		g.AoRChanged("trunk")
		stop = run()
		defer stop()
		synctest.Wait()
		if got := delivered(); len(got) != 1 || got[0] != "up>up" {
			t.Fatalf("second term delivered %v, want [up>up]: the receiver may hold another node's down", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := delivered(); len(got) != 0 {
			t.Fatalf("delivered %v later in the term, want nothing: a webhook does not reassert on a timer", got)
		}
	})
}

// startRun runs g until the returned function cancels it and waits for
// Run to return.
func startRun(t *testing.T, g *Group) func() {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// TestGroupRunWaitsForAReloadsRelease: a reload that removes a sink
// while Run runs queues its release; Run, stopped before the reload has
// run it (here the reload writes its log line first, and the line
// waits), returns only once the release is done: no release runs after
// Run returned, and none is added to a WaitGroup Run waits on.
func TestGroupRunWaitsForAReloadsRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, src := trunks(3, pjsip.Panic{MinDestinations: 4}, amiSink())
		src.set("trunk0", qualify.Unreachable)
		src.set("trunk1", qualify.Unreachable)
		src.set("trunk2", qualify.Reachable)
		f := newFakeManager("s3cret")
		var armed, held, free = make(chan struct{}), make(chan struct{}), make(chan struct{})
		var once sync.Once
		notice := func(slog.Level, string, ...slog.Attr) {
			select {
			case <-armed:
				once.Do(func() { close(held); <-free }) // the first line after armed waits
			default:
			}
		}
		g := NewGroup(Config{Source: src, Dial: f.dial, Notice: notice})
		g.Configure(c)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan struct{})
		go func() { g.Run(ctx); close(ran) }()
		synctest.Wait()
		if got := devices(f, 3); got != "UU." {
			t.Fatalf("devices %s while running", got)
		}
		close(armed)
		unblock := sync.OnceFunc(func() { close(free) })
		defer unblock()
		c2, _ := trunks(3, pjsip.Panic{MinDestinations: 3}) // the sink removed; a panic begins
		reloaded := make(chan struct{})
		go func() { g.Configure(c2); close(reloaded) }()
		<-held // the reload's panic line waits, its release queued
		cancel()
		synctest.Wait()
		select {
		case <-ran:
			if got := devices(f, 3); got != "..." {
				t.Fatalf("Run returned with the removed sink's release still to run (devices %s)", got)
			}
		default:
		}
		unblock()
		<-reloaded
		<-ran
		if got := devices(f, 3); got != "..." {
			t.Fatalf("devices %s once Run returned, want the removed sink released", got)
		}
	})
}
