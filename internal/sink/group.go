package sink

import (
	"context"
	"log/slog"
	"net"
	"sync"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Config configures a Group. Source is required.
type Config struct {
	// Source is the engine the levels are read from.
	Source Source
	// Notice, if set, logs each sink's failures and recoveries.
	Notice func(level slog.Level, msg string, attrs ...slog.Attr)
	// Dial, if set, replaces the AMI drivers' network dial (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Group is the daemon's sinks: built from the configuration, fed with
// the AoRs that changed, run until the daemon stops. Its methods are
// safe for concurrent use.
type Group struct {
	cfg Config

	mu    sync.Mutex
	sinks []*sink       // in configuration order
	start func(s *sink) // starts a sink's loop while Run runs; nil otherwise
	stops []func()      // the loops to stop, by Configure, outside mu
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
}

// NewGroup returns a group without sinks.
func NewGroup(cfg Config) *Group { return &Group{cfg: cfg} }

// Configure applies conf's sinks: a sink Equal to its previous
// definition keeps running with its objects; a changed one is replaced,
// carrying its objects (so that one the new plan drops is still pushed
// Up once); a removed one is stopped. Every level is then recomputed, and
// the objects no plan has are retired.
func (g *Group) Configure(conf *pjsip.Config) {
	g.mu.Lock()
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
		g.stopLater(s)
	}
	stops := g.stops
	g.stops = nil
	for _, s := range g.sinks {
		g.recompute(s)
	}
	g.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// carry returns the sink for def: prev itself when unchanged, else a new
// one with prev's objects when the driver is the same. Called with mu
// held.
func (g *Group) carry(prev *sink, def *pjsip.Sink, conf *pjsip.Config) *sink {
	if prev != nil && prev.def.Equal(def) {
		prev.def, prev.plan = def, newPlan(def, conf)
		return prev
	}
	s := &sink{def: def, rec: g.reconciler(def), plan: newPlan(def, conf)}
	if prev != nil {
		if prev.def.Driver == def.Driver {
			s.rec.adopt(prev.rec)
		}
		g.stopLater(prev)
	}
	if g.start != nil {
		g.start(s)
	}
	return s
}

// stopLater queues the stop of s's loop. Called with mu held.
func (g *Group) stopLater(s *sink) {
	if s.stop != nil {
		g.stops = append(g.stops, s.stop)
		s.stop = nil
	}
}

// reconciler builds def's driver and reconciler.
func (g *Group) reconciler(def *pjsip.Sink) *Reconciler {
	iv := Intervals{Reassert: def.ReassertInterval}
	switch def.Driver {
	case "ami":
		iv.Heartbeat = def.HeartbeatInterval
	case "kamailio":
		iv.Resync, iv.Heartbeat = def.ResyncInterval, def.HeartbeatInterval
	default:
		iv.Reassert = 0
	}
	r := newReconciler(def.Name, newDriver(def, g.cfg.Dial), iv, g.cfg.Notice, nil)
	r.reasserts = def.Driver != "webhook"
	return r
}

// newDriver builds def's driver; dial, if set, replaces an AMI driver's
// network dial.
func newDriver(def *pjsip.Sink, dial func(ctx context.Context, network, addr string) (net.Conn, error)) driver {
	switch def.Driver {
	case "ami":
		return &AMI{Address: def.Address, TLS: def.TLS, Username: def.Username, Secret: def.Secret.Reveal(),
			MD5: def.Auth != "plain", Prefix: def.DevicePrefix, Maintenance: def.Method == "maintenance",
			Timeout: def.Timeout, Dial: dial}
	case "kamailio":
		return &Kamailio{URL: def.URL, Timeout: def.Timeout, Heartbeat: def.HeartbeatInterval, FailOpenAfter: def.FailOpenAfter}
	}
	return &Webhook{URL: def.URL, Secret: def.Secret.Reveal(), Timeout: def.Timeout}
}

// recompute sets every object of s from the source and retires the
// objects its plan no longer has. Called with mu held.
func (g *Group) recompute(s *sink) {
	for k := range s.plan.deps {
		l, reason := s.plan.level(k, g.cfg.Source)
		s.rec.Set(k, l, reason)
	}
	s.rec.Keys(func(k Key) bool { _, ok := s.plan.deps[k]; return ok })
}

// AoRChanged recomputes every object that depends on the AoR name. It
// never blocks on a router.
func (g *Group) AoRChanged(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sinks {
		for _, k := range s.plan.byAoR[name] {
			l, reason := s.plan.level(k, g.cfg.Source)
			s.rec.Set(k, l, reason)
		}
	}
}

// Resync recomputes every object of every sink, after events were lost.
func (g *Group) Resync() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sinks {
		g.recompute(s)
	}
}

// Run runs every sink's loop, and those Configure adds, until ctx is
// done; then it stops them all (cancel and wait) and returns. The last
// wanted levels are recomputed from the engine at the next start.
func (g *Group) Run(ctx context.Context) {
	var wg sync.WaitGroup
	g.mu.Lock()
	g.start = func(s *sink) {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		wg.Go(func() { s.rec.Run(sctx); close(done) })
		s.stop = func() { cancel(); <-done }
	}
	for _, s := range g.sinks {
		g.start(s)
	}
	g.mu.Unlock()
	<-ctx.Done()
	g.mu.Lock()
	g.start = nil
	g.mu.Unlock()
	wg.Wait()
}

// Objects returns the state and the objects of the sink named name, or
// false when there is none.
func (g *Group) Objects(name string) (Status, []ObjectState, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sinks {
		if s.def.Name == name {
			return Status{Name: s.def.Name, Driver: s.def.Driver, Stats: s.rec.Stats()}, s.rec.Objects(), true
		}
	}
	return Status{}, nil, false
}

// Status returns every sink's state, in configuration order.
func (g *Group) Status() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Status, 0, len(g.sinks))
	for _, s := range g.sinks {
		out = append(out, Status{Name: s.def.Name, Driver: s.def.Driver, Stats: s.rec.Stats()})
	}
	return out
}
