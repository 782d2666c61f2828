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

	// wake tells Run that a watcher waits to start (buffered, 1).
	wake chan struct{}

	mu      sync.Mutex
	running map[string]*watch
}

// watch is one running (or, before Run, waiting) Calls.
type watch struct {
	def   *pjsip.Sink
	calls *Calls
	stop  context.CancelFunc // nil until Run starts it
}

// NewWatchers returns watchers that hand their observations to to; dial
// and notice are as in Config.
func NewWatchers(to observe.Sink, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	notice func(level slog.Level, msg string, attrs ...slog.Attr)) *Watchers {
	return &Watchers{to: to, dial: dial, notice: notice, running: map[string]*watch{}, wake: make(chan struct{}, 1)}
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
		w.running[def.Name] = &watch{def: def, calls: NewCalls(def, conf, w.to, w.dial, w.notice)}
		select {
		case w.wake <- struct{}{}:
		default: // Run is woken already
		}
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

// Run runs the watchers, and each one Configure adds while it runs,
// until ctx is done, and waits for them.
func (w *Watchers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		w.startWaiting(ctx, &wg)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
	}
}

// startWaiting starts, under ctx and counted in wg, the watchers not
// started yet.
func (w *Watchers) startWaiting(ctx context.Context, wg *sync.WaitGroup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.running {
		if x.stop == nil && ctx.Err() == nil {
			wctx, cancel := context.WithCancel(ctx)
			x.stop = cancel
			wg.Go(func() { x.calls.Run(wctx) })
		}
	}
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
