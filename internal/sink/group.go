package sink

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// awaitEvery is how often the objects held outside a panic (when it
// ended, or by the lower mark) are set again, so that one is pushed down
// at most this long after a probe made after the end confirms it, or
// after its wait.
const awaitEvery = time.Second

// Config configures a Group. Source is required.
type Config struct {
	// Source is the engine the levels are read from.
	Source Source
	// Notice, if set, logs each sink's failures and recoveries.
	Notice func(level slog.Level, msg string, attrs ...slog.Attr)
	// Dial, if set, replaces the AMI drivers' network dial (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Vouch, if set, is asked before every heartbeat whether qualifyd
	// can vouch for its verdicts; an error withholds the heartbeat (the
	// router fails open after failopen_after) and says why.
	Vouch func() error
	// Gate, if set, is asked right before every push and heartbeat
	// whether this qualifyd may change the routers now (in a cluster:
	// whether it leads), and until when: the push or heartbeat runs
	// under a context that ends then (the zero time: no end), so that
	// one caught past it (a paused process) is abandoned. An error
	// withholds it and ends the session, which reconnects with backoff
	// and asks again.
	Gate func() (time.Time, error)
	// Clock, if set, replaces time.Now (tests): the holds and deadlines
	// run on its Mono, so that a step of Wall moves none of them.
	Clock Clock
	// Calls, if set, gives the state of the ami sinks' call watchers by
	// sink name (Watchers.Stats), which Status reports beside the sinks'.
	Calls func() map[string]CallStats
}

// Group is the daemon's sinks: built from the configuration, fed with
// the AoRs that changed, run until the daemon stops. Its methods are
// safe for concurrent use.
type Group struct {
	cfg   Config
	clock *clock // shared by the sinks' reconcilers

	mu    sync.Mutex
	sinks []*sink       // in configuration order
	start func(s *sink) // starts a sink's loop while Run runs; nil otherwise
	// release, while Run runs (nil otherwise), counts a retired sink's
	// release among what Run waits for, and returns the function that
	// runs it in the background: counted under mu, before Run's wait
	// begins, though it runs later, outside mu.
	release func(s *sink) func()
	stops   []func()      // the loops to stop (and release), by Configure, outside mu
	conf    *pjsip.Config // the configuration applied last
	census  census
	rule    panicRule
	panic   Panic
	// changed is the clock's Mono reading when the panic last began or
	// ended (panic.Since is the Wall reading shown); zero before.
	changed time.Time
	// awaiting holds the AoRs of the objects held when the last panic
	// ended, or held since by the lower mark, until no object of theirs
	// is held: each is looked at again every awaitEvery, as a probe of a
	// contact still down publishes nothing.
	awaiting map[string]struct{}
	notes    []func() // log lines to write outside mu
	// holding wakes Run (capacity 1) when the lower mark holds an
	// object or a reload may change its wait, so that its timer is
	// armed at the earliest wait's end (wakeExpire).
	holding chan struct{}
}

// sink is one configured sink.
type sink struct {
	def  *pjsip.Sink
	rec  *Reconciler
	plan *plan
	stop func() // cancels the loop and waits for it; nil when not running
}

// Status is one sink's state, for the API and the metrics.
type Status struct {
	Name, Driver string
	Stats
	// Calls is the state of the sink's call watcher (observe_calls=yes);
	// nil for a sink without one.
	Calls *CallStats
}

// NewGroup returns a group without sinks.
func NewGroup(cfg Config) *Group {
	return &Group{cfg: cfg, clock: newClock(cfg.Clock), holding: make(chan struct{}, 1)}
}

// Configure applies conf's sinks: a sink Equal to its previous
// definition keeps running with its objects; one changed but for the
// router it drives is replaced, carrying its objects (so that one the
// new plan drops is still pushed Up once); one removed, or whose router
// changed (driver, address, url, method or device prefix), is released:
// its loop stops, then it pushes Up what its router may hold Down,
// bounded by its timeout (see Reconciler.Release). The destinations
// are counted again, every level is recomputed, and the objects no plan
// has are retired.
func (g *Group) Configure(conf *pjsip.Config) {
	g.mu.Lock()
	g.conf, g.rule = conf, newPanicRule(conf.Panic)
	g.rule.wait = holdBound(conf)
	g.census.recount(conf, g.cfg.Source.AoR, g.clock.monoNow())
	old := map[string]*sink{}
	for _, s := range g.sinks {
		old[s.def.Name] = s
	}
	g.sinks = g.sinks[:0:0]
	for _, def := range conf.Sinks {
		s := g.carry(old[def.Name], def, conf)
		delete(old, def.Name)
		g.sinks = append(g.sinks, s)
	}
	for _, s := range old {
		g.releaseLater(s)
	}
	stops := g.stops
	g.stops = nil
	g.evaluate()
	for _, s := range g.sinks {
		s.rec.Wait(g.panic.Waiting, g.rule.wait)
		g.recompute(s)
	}
	g.wakeExpire() // the wait may have changed: re-arm Run's timer
	g.unlock()
	for _, stop := range stops {
		stop()
	}
}

// observe takes the AoR name's contacts into the census. Called with mu
// held.
func (g *Group) observe(name string) {
	if a, ok := g.cfg.Source.AoR(name); ok {
		g.census.observe(&a, g.clock.monoNow())
	}
}

// evaluate applies the panic rule to the census; on a change it holds
// (or lets go) every sink and queues the log line. Short of a panic, it
// applies the lower mark to the destinations recently failing, the
// census aged first (see Reconciler.Wait). Called with mu held.
func (g *Group) evaluate() {
	g.census.age(g.clock.monoNow(), g.rule.wait)
	p := g.panic
	p.Destinations, p.Failing, p.Down, p.Recent = g.census.size(), g.census.failing, g.census.out, g.census.recent
	p.Threshold, p.MinDestinations, p.HoldThreshold, p.Hold = g.rule.threshold, g.rule.min, g.rule.hold, g.rule.wait
	if now := g.rule.panics(p.Failing, p.Destinations); now != p.Active {
		p.Active, p.Since, g.changed = now, g.clock.wall(), g.clock.monoNow()
		for _, s := range g.sinks {
			s.rec.Hold(now)
		}
		p.TakenBack = 0
		if now {
			p.TakenBack = g.takeBack(g.changed)
		}
		level, line := panicLine(p)
		g.notes = append(g.notes, func() { g.cfg.notice(level, line) })
		g.awaiting = nil
		if !now {
			g.await()
		}
	}
	if w := !p.Active && g.rule.waits(p.Recent, p.Destinations); w != p.Waiting {
		p.Waiting = w
		for _, s := range g.sinks {
			s.rec.Wait(w, g.rule.wait)
		}
	}
	g.panic = p
}

// takeBack holds, as a panic begins at now, every Down of its own event:
// an object wanted Down whose failing destinations all began their
// streaks within the wait before now. A Down that came before the
// trouble (a destination failing for longer) stays down (qualify-semantics
// §6.1). It returns how many objects it took back. O(the sinks'
// objects), once a panic. Called with mu held.
func (g *Group) takeBack(now time.Time) int {
	from := now.Add(-g.rule.wait)
	dests := aorDestinations(g.conf)
	n := 0
	for _, s := range g.sinks {
		for k, aors := range s.plan.deps {
			if g.ofThisEvent(objectDestinations(k, aors, dests), from) && s.rec.TakeBack(k) {
				n++
			}
		}
	}
	return n
}

// ofThisEvent reports whether some of ds are failing and every one
// failing began its streak at from or later. Called with mu held.
func (g *Group) ofThisEvent(ds []string, from time.Time) bool {
	failing := false
	for _, d := range ds {
		s, ok := g.census.since[d]
		if !ok {
			continue
		}
		if s.at.Before(from) {
			return false
		}
		failing = true
	}
	return failing
}

// objectDestinations returns the destinations object k stands on: its own
// for a host or a contact, else those of its AoRs' contacts.
func objectDestinations(k Key, aors []string, dests map[string][]string) []string {
	switch k.Kind {
	case KindHost:
		return []string{k.Name}
	case KindContact:
		if d, ok := hostPort(k.URI); ok {
			return []string{d}
		}
		return nil
	}
	var out []string
	for _, a := range aors {
		out = append(out, dests[a]...)
	}
	return out
}

// aorDestinations returns each AoR's contacts' destinations.
func aorDestinations(conf *pjsip.Config) map[string][]string {
	out := map[string][]string{}
	if conf == nil {
		return out
	}
	for i := range conf.AoRs {
		out[conf.AoRs[i].Name] = destinations(&conf.AoRs[i])
	}
	return out
}

// calm returns when the last panic ended (or began) on the wall clock in
// its present terms (now less the span since, on Mono), as the engine's
// probe times are read: a probe read after a step of the wall clock
// compares right with an end before it. Called with mu held.
func (g *Group) calm() time.Time {
	if g.changed.IsZero() {
		return time.Time{}
	}
	return g.clock.wall().Add(-g.clock.monoNow().Sub(g.changed))
}

// await collects the AoRs of every held object, at the end of a panic.
// Called with mu held.
func (g *Group) await() {
	g.awaiting = map[string]struct{}{}
	for _, s := range g.sinks {
		s.rec.heldKeys(func(k Key) {
			for _, a := range s.plan.deps[k] {
				g.awaiting[a] = struct{}{}
			}
		})
	}
}

// setLevel sets k's level in s from the source; a Down is fresh when it
// rests only on probes sent after the last panic ended. An object held
// outside a panic is awaited. Called with mu held.
func (g *Group) setLevel(s *sink, k Key) {
	l, reason, since := s.plan.level(k, g.cfg.Source)
	fresh := g.panic.Active || !since.Before(g.calm())
	if s.rec.set(k, l, reason, fresh) && !g.panic.Active {
		g.wakeExpire()
		if g.awaiting == nil {
			g.awaiting = map[string]struct{}{}
		}
		for _, a := range s.plan.deps[k] {
			g.awaiting[a] = struct{}{}
		}
	}
}

// recheck ages the census (the lower mark counts the destinations
// recently failing), sets again the objects of every awaited AoR, and
// forgets those AoRs none of whose objects is held any more: a Down held
// in a panic is pushed once a probe made after it confirms it.
// O(awaited objects + streaks aged).
func (g *Group) recheck() {
	g.mu.Lock()
	defer g.unlock()
	g.evaluate()
	if g.panic.Active {
		return
	}
	for a := range g.awaiting {
		still := false
		for _, s := range g.sinks {
			for _, k := range s.plan.byAoR[a] {
				g.setLevel(s, k)
				still = still || s.rec.isHeld(k)
			}
		}
		if !still {
			delete(g.awaiting, a)
		}
	}
}

// wakeExpire wakes Run to look at the lower mark's holds and arm its
// timer at the earliest wait's end (expire).
func (g *Group) wakeExpire() {
	select {
	case g.holding <- struct{}{}:
	default:
	}
}

// unlock releases mu, then writes the queued log lines.
func (g *Group) unlock() {
	notes := g.notes
	g.notes = nil
	g.mu.Unlock()
	for _, n := range notes {
		n()
	}
}

// notice is Notice, or nothing.
func (c *Config) notice(level slog.Level, msg string, attrs ...slog.Attr) {
	if c.Notice != nil {
		c.Notice(level, msg, attrs...)
	}
}

// Panic returns the panic state.
func (g *Group) Panic() Panic {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.panic
}

// carry returns the sink for def: prev itself when unchanged, else a new
// one, with prev's objects when the router is the same (else prev is
// released). Called with mu held.
func (g *Group) carry(prev *sink, def *pjsip.Sink, conf *pjsip.Config) *sink {
	if prev != nil && prev.def.Equal(def) {
		prev.def, prev.plan = def, newPlan(def, conf)
		return prev
	}
	s := &sink{def: def, rec: g.reconciler(def), plan: newPlan(def, conf)}
	s.rec.Hold(g.panic.Active)
	s.rec.Wait(g.panic.Waiting, g.rule.wait)
	switch {
	case prev != nil && sameRouter(prev.def, def):
		s.rec.adopt(prev.rec)
		g.stopLater(prev)
	case prev != nil:
		g.releaseLater(prev)
	}
	if g.start != nil {
		g.start(s)
	}
	return s
}

// sameRouter reports whether a and b drive the same objects of the same
// router: a sink changed otherwise keeps its objects' levels.
func sameRouter(a, b *pjsip.Sink) bool {
	return a.Driver == b.Driver && a.Address == b.Address && a.URL == b.URL &&
		a.Method == b.Method && a.DevicePrefix == b.DevicePrefix
}

// stopLater queues the stop of s's loop. Called with mu held.
func (g *Group) stopLater(s *sink) {
	if s.stop != nil {
		g.stops = append(g.stops, s.stop)
		s.stop = nil
	}
}

// releaseLater queues the stop of s's loop, then its release in the
// background. A sink whose loop never ran has pushed nothing. Called with
// mu held.
func (g *Group) releaseLater(s *sink) {
	if s.stop == nil {
		return
	}
	stop, release := s.stop, g.release(s)
	s.stop = nil
	g.stops = append(g.stops, func() { stop(); release() })
}

// retire releases s, bounded by its timeout even when ctx is done (the
// daemon stops), and logs how many objects it released.
func (g *Group) retire(ctx context.Context, s *sink) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.def.Timeout)
	defer cancel()
	n, failed := s.rec.Release(ctx, false)
	msg := fmt.Sprintf("sink %s: stopped: released %d objects the router may hold down (pushed up)", s.def.Name, n)
	if failed > 0 {
		g.cfg.notice(slog.LevelWarn, msg+fmt.Sprintf("; %d not confirmed within %v: %s", failed, s.def.Timeout, s.rec.Stats().LastError))
		return
	}
	g.cfg.notice(slog.LevelInfo, msg)
}

// reconciler builds def's driver and reconciler.
func (g *Group) reconciler(def *pjsip.Sink) *Reconciler {
	iv := Intervals{Reassert: def.ReassertInterval}
	switch def.Driver {
	case "ami":
		iv.Heartbeat = def.HeartbeatInterval
		if def.Method == "maintenance" {
			// Read the maintenance set back at every beat: `qualifyd
			// guard` may have released it while qualifyd was silent.
			iv.Resync = def.HeartbeatInterval
		}
	case "kamailio":
		iv.Resync, iv.Heartbeat = def.ResyncInterval, def.HeartbeatInterval
	default:
		iv.Reassert, iv.Heartbeat = 0, def.HeartbeatInterval
	}
	r := newReconciler(def.Name, newDriver(def, g.cfg.Dial), iv, g.cfg.Notice, nil)
	r.reasserts = def.Driver != "webhook"
	r.vouch, r.gate, r.clock = g.cfg.Vouch, g.cfg.Gate, g.clock
	return r
}

// newDriver builds def's driver; dial, if set, replaces an AMI driver's
// network dial.
func newDriver(def *pjsip.Sink, dial func(ctx context.Context, network, addr string) (net.Conn, error)) driver {
	switch def.Driver {
	case "ami":
		a := NewAMI(def, dial)
		if a.Maintenance {
			return maintenance{a}
		}
		return a
	case "kamailio":
		return &Kamailio{URL: def.URL, Timeout: def.Timeout, FailOpenAfter: def.FailOpenAfter}
	}
	return &Webhook{URL: def.URL, Secret: def.Secret.Reveal(), Timeout: def.Timeout, FailOpenAfter: def.FailOpenAfter}
}

// NewAMI returns the Manager client of ami sink def; dial, if set,
// replaces the network dial.
func NewAMI(def *pjsip.Sink, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *AMI {
	return &AMI{Address: def.Address, TLS: def.TLS, Username: def.Username, Secret: def.Secret.Reveal(),
		MD5: def.Auth != "plain", Prefix: def.DevicePrefix, Maintenance: def.Method == "maintenance",
		FailOpenAfter: def.FailOpenAfter, Timeout: def.Timeout, Dial: dial}
}

// recompute sets every object of s from the source and retires the
// objects its plan no longer has. Called with mu held.
func (g *Group) recompute(s *sink) {
	for k := range s.plan.deps {
		g.setLevel(s, k)
	}
	s.rec.Keys(func(k Key) bool { _, ok := s.plan.deps[k]; return ok })
}

// AoRChanged counts the AoR name's destinations again, applies the
// panic rule, and recomputes every object that depends on the AoR. It
// never blocks on a router.
func (g *Group) AoRChanged(name string) {
	g.mu.Lock()
	defer g.unlock()
	g.observe(name)
	g.evaluate()
	for _, s := range g.sinks {
		for _, k := range s.plan.byAoR[name] {
			g.setLevel(s, k)
		}
	}
}

// Resync counts every destination again and recomputes every object of
// every sink, after events were lost.
func (g *Group) Resync() {
	g.mu.Lock()
	defer g.unlock()
	if g.conf != nil {
		g.census.recount(g.conf, g.cfg.Source.AoR, g.clock.monoNow())
	}
	g.evaluate()
	for _, s := range g.sinks {
		g.recompute(s)
	}
}

// Run runs every sink's loop, and those Configure adds, until ctx is
// done; then it stops them all (cancel and wait), without releasing
// anything, and returns. Run may be called again once it returned (a
// cluster node that leads again). Each Run is a leading edge: every
// sink, the webhook too, first pushes every level it knows, since
// another node may have pushed others meanwhile.
func (g *Group) Run(ctx context.Context) {
	var wg sync.WaitGroup
	g.mu.Lock()
	g.start = func(s *sink) {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		wg.Go(func() { s.rec.Run(sctx); close(done) })
		s.stop = func() { cancel(); <-done }
	}
	g.release = func(s *sink) func() {
		wg.Add(1)
		return func() {
			go func() { defer wg.Done(); g.retire(ctx, s) }()
		}
	}
	for _, s := range g.sinks {
		s.rec.requeue(true) // a leading edge: every level, even a webhook's
		g.start(s)
	}
	g.mu.Unlock()
	tick := time.NewTicker(awaitEvery)
	ends := time.NewTimer(0) // the earliest end of a lower mark's wait
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
			continue
		case <-tick.C: // a hold it makes wakes holding
			g.recheck()
			continue
		case <-g.holding:
		case <-ends.C:
		}
		g.expire(ends)
	}
	tick.Stop()
	ends.Stop()
	g.mu.Lock()
	// One step, so that a Configure while the loops stop finds neither a
	// release to run nor a loop to stop: a sink it removes now has
	// nothing to release, and wg waits for every loop.
	g.start, g.release = nil, nil
	for _, s := range g.sinks {
		s.stop = nil
	}
	g.mu.Unlock()
	wg.Wait()
}

// expire pushes down the lower mark's holds whose wait has ended, in
// every sink, and arms t at the earliest wait still running (see
// Reconciler.expire).
func (g *Group) expire(t *time.Timer) {
	g.mu.Lock()
	var next int64
	found := false
	for _, s := range g.sinks {
		if n, ok := s.rec.expire(); ok && (!found || n < next) {
			next, found = n, true
		}
	}
	g.mu.Unlock()
	t.Stop()
	if found {
		t.Reset(time.Duration(next - g.clock.mono()))
	}
}

// Objects returns the state and the objects of the sink named name, or
// false when there is none.
func (g *Group) Objects(name string) (Status, []ObjectState, bool) {
	calls := g.calls()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sinks {
		if s.def.Name == name {
			return s.status(calls), s.rec.Objects(), true
		}
	}
	return Status{}, nil, false
}

// Status returns every sink's state, in configuration order.
func (g *Group) Status() []Status {
	calls := g.calls()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Status, 0, len(g.sinks))
	for _, s := range g.sinks {
		out = append(out, s.status(calls))
	}
	return out
}

// calls returns the call watchers' states (Config.Calls), nil without
// the hook. Called without mu: the watchers have their own lock.
func (g *Group) calls() map[string]CallStats {
	if g.cfg.Calls == nil {
		return nil
	}
	return g.cfg.Calls()
}

// status returns s's state, with its call watcher's from calls.
func (s *sink) status(calls map[string]CallStats) Status {
	st := Status{Name: s.def.Name, Driver: s.def.Driver, Stats: s.rec.Stats()}
	if c, ok := calls[s.def.Name]; ok {
		st.Calls = &c
	}
	return st
}
