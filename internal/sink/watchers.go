package sink

import (
	"context"
	"log/slog"
	"net"
	"sync"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Watchers runs a Calls for each ami sink with observe_calls=yes: built
// from the configuration, run until the daemon stops. Its methods are
// safe for concurrent use.
type Watchers struct {
	to     observe.Sink
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	notice func(level slog.Level, msg string, attrs ...slog.Attr)

	mu      sync.Mutex
	ctx     context.Context // Run's, nil while it does not run
	wg      sync.WaitGroup
	running map[string]*watch
}

// watch is one running (or, before Run, waiting) Calls.
type watch struct {
	def   *pjsip.Sink
	calls *Calls
	stop  context.CancelFunc // nil until started
}

// NewWatchers returns watchers that hand their observations to to; dial
// and notice are as in Config.
func NewWatchers(to observe.Sink, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	notice func(level slog.Level, msg string, attrs ...slog.Attr)) *Watchers {
	return &Watchers{to: to, dial: dial, notice: notice, running: map[string]*watch{}}
}

// Configure applies conf: a watcher whose sink is unchanged watches
// conf's endpoints from now on; one whose sink changed or went is
// stopped, and a new one started.
func (w *Watchers) Configure(conf *pjsip.Config) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := map[string]bool{}
	for _, def := range conf.Sinks {
		if def.Driver != "ami" || !def.ObserveCalls {
			continue
		}
		keep[def.Name] = true
		if old := w.running[def.Name]; old != nil && old.def.Equal(def) {
			old.calls.Configure(conf)
			continue
		}
		w.retire(def.Name)
		x := &watch{def: def, calls: NewCalls(def, conf, w.to, w.dial, w.notice)}
		w.running[def.Name] = x
		w.start(x)
	}
	for name := range w.running {
		if !keep[name] {
			w.retire(name)
		}
	}
}

// retire stops the watcher name, if any. Called with mu held.
func (w *Watchers) retire(name string) {
	if x := w.running[name]; x != nil && x.stop != nil {
		x.stop()
	}
	delete(w.running, name)
}

// start runs x while Run runs. Called with mu held.
func (w *Watchers) start(x *watch) {
	if w.ctx == nil {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	x.stop = cancel
	w.wg.Go(func() { x.calls.Run(ctx) })
}

// Run runs the watchers until ctx is done, and waits for them.
func (w *Watchers) Run(ctx context.Context) {
	w.mu.Lock()
	w.ctx = ctx
	for _, x := range w.running {
		w.start(x)
	}
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	w.ctx = nil
	w.mu.Unlock()
	w.wg.Wait()
}

// Stats returns each watcher's state by sink name.
func (w *Watchers) Stats() map[string]CallStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]CallStats, len(w.running))
	for name, x := range w.running {
		out[name] = x.calls.Stats()
	}
	return out
}
