package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
	"github.com/qualifyd/qualifyd/internal/web"
)

// runOptions are the flags of `qualifyd run`.
type runOptions struct {
	config    string
	configDir string
	httpAddr  string
	sipBind   string
	logFormat string
	token     string
	tokenFile string
	perAoR    int
	coalesce  time.Duration
}

func parseRun(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "qualifyd's configuration file (pjsip.conf syntax; may #include the PBX's files)")
	fs.StringVar(&o.configDir, "config-dir", "", "directory relative #include paths resolve against (Asterisk's astetcdir; default: the config file's directory)")
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:8089", "HTTP API, metrics and status page address; empty disables HTTP")
	fs.StringVar(&o.sipBind, "sip-bind", "", "local UDP address of the probe socket (default: an ephemeral port on all interfaces)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text (Asterisk's lines) or json")
	fs.StringVar(&o.token, "token", "", "bearer token required by the API's write routes (prefer --token-file)")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
	fs.IntVar(&o.perAoR, "metrics-per-aor", 0, "export per-AoR metric series for at most this many AoRs (0: none)")
	fs.DurationVar(&o.coalesce, "coalesce", engine.DefaultCoalesce, "start the probes due within this window in one wake-up, each at most this late (0: each at its due time)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return o, err
	}
	if len(pos) > 0 {
		return o, fmt.Errorf("unexpected arguments %q", pos)
	}
	if o.config == "" {
		return o, errors.New("--config FILE is required")
	}
	if o.coalesce < 0 || o.coalesce > time.Second {
		return o, fmt.Errorf("--coalesce %v: want 0 to 1s", o.coalesce)
	}
	if err := o.readToken(); err != nil {
		return o, err
	}
	if o.httpAddr != "" {
		return o, web.ListenCheck(o.httpAddr, o.token)
	}
	return o, nil
}

// readToken loads --token-file into token.
func (o *runOptions) readToken() error {
	if o.tokenFile == "" {
		return nil
	}
	if o.token != "" {
		return errors.New("--token and --token-file are exclusive")
	}
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	o.token = string(bytes.TrimSpace(b))
	if o.token == "" {
		return fmt.Errorf("--token-file %s: empty", o.tokenFile)
	}
	return nil
}

// runDaemon is `qualifyd run`: qualify the configured AoRs until SIGINT or
// SIGTERM, reloading on SIGHUP.
func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "qualifyd run:", err)
		}
		return 2
	}
	log, err := newEventLog(stdout, o.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd run:", err)
		return 2
	}
	setGCPercent(os.Getenv)
	d, err := newDaemon(o, log)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd run:", err)
		return 1
	}
	if err := d.serve(ctx); err != nil {
		fmt.Fprintln(stderr, "qualifyd run:", err)
		return 1
	}
	return 0
}

// defaultGCPercent is the daemon's GOGC when the environment sets none.
// The daemon makes almost no garbage while probing, so Go's collector
// seldom runs; but a burst of events (a million contacts changing status
// at start or in an outage, each logged) or a reload fills the heap up to
// the collector's goal, twice the live heap at Go's default of 100, and
// the process keeps that memory. At 50 the goal is one and a half times
// the live heap, at the cost of collecting twice as often during such a
// burst (issue 7: at a million dead contacts, RSS 775-790 -> 581-585 B
// per contact, qualifyd-bench daemon).
const defaultGCPercent = 50

// setGCPercent applies defaultGCPercent unless GOGC is set.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// daemon is one running qualifyd: configuration, prober, engine, logs,
// metrics and the HTTP front.
type daemon struct {
	opts      runOptions
	log       *eventLog
	prober    *sipprobe.Prober
	eng       *engine.Engine
	metrics   *metrics.Metrics
	http      *httpFront // nil without --http
	endpoints *endpointWatch
	reloadMu  sync.Mutex                          // one reload at a time
	events    atomic.Pointer[engine.Subscription] // the log's, once serving
}

// eventsDropped is how many events the log's subscription dropped.
func (d *daemon) eventsDropped() uint64 {
	if sub := d.events.Load(); sub != nil {
		return sub.Dropped()
	}
	return 0
}

// newDaemon loads the configuration and builds the prober, engine, metrics
// and HTTP front; a broken configuration or a busy port stops it before
// anything is sent.
func newDaemon(o runOptions, log *eventLog) (*daemon, error) {
	cfg, err := pjsip.Load(o.config, pjsip.Options{ConfigDir: o.configDir})
	if err != nil {
		return nil, err
	}
	d := &daemon{opts: o, log: log, endpoints: newEndpointWatch()}
	if d.prober, err = sipprobe.New(sipprobe.Config{ListenAddr: o.sipBind}); err != nil {
		return nil, err
	}
	if err = d.build(cfg); err != nil {
		d.prober.Close()
		return nil, err
	}
	return d, nil
}

// build creates the metrics, the engine with cfg applied, and the HTTP
// front.
func (d *daemon) build(cfg *pjsip.Config) error {
	reg, m, err := newMetrics(func() (*engine.Engine, *sipprobe.Prober) { return d.eng, d.prober }, d.eventsDropped, d.opts.perAoR)
	if err != nil {
		return err
	}
	d.metrics = m
	d.eng, err = engine.New(engine.Config{Prober: d.prober, MaxInitialQualifyTime: cfg.MaxInitialQualifyTime,
		Observe: m.ObserveProbe, Lateness: m.ObserveLateness, Coalesce: engineCoalesce(d.opts.coalesce)})
	if err != nil {
		return err
	}
	if err := d.apply(cfg); err != nil {
		return err
	}
	if d.opts.httpAddr == "" {
		return nil
	}
	d.http, err = newHTTPFront(d.opts.httpAddr, web.Config{Engine: d.eng, Reload: d.reload, Token: d.opts.token, Gatherer: reg}, m)
	return err
}

// engineCoalesce maps --coalesce to engine.Config.Coalesce, where zero
// means the default and a negative value exact starts.
func engineCoalesce(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// apply hands cfg to the engine and the endpoint watch, then returns the
// parse and reload garbage to the OS: at a million contacts a reload
// peaks near 1.1 KiB per contact while the running table needs about
// 400 B. It collects the reader's garbage (about 200 MB at a million AoRs)
// before the engine allocates, so that the engine reuses that memory
// instead of growing the heap next to it: a start's peak was a quarter
// lower for a 60 ms collection (issue 7).
func (d *daemon) apply(cfg *pjsip.Config) error {
	runtime.GC()
	if err := d.eng.ApplyFunc(len(cfg.AoRs), engineAoR(cfg)); err != nil {
		return err
	}
	d.endpoints.configure(cfg.Endpoints, d.aorAvailable)
	debug.FreeOSMemory()
	return nil
}

// reload re-reads the configuration file and applies it with the reload
// rule; on any error the running configuration stays and the error is
// returned (and logged).
func (d *daemon) reload(context.Context) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, err := pjsip.Load(d.opts.config, pjsip.Options{ConfigDir: d.opts.configDir})
	if err == nil {
		err = d.apply(cfg)
	}
	if err != nil {
		d.log.notice(slog.LevelError, "reload failed, keeping the running configuration: "+err.Error())
		return err
	}
	d.log.notice(slog.LevelInfo, "configuration reloaded", countAttrs(cfg)...)
	return nil
}

func (d *daemon) aorAvailable(name string) bool {
	a, ok := d.eng.AoR(name)
	return ok && a.Available
}

// serve runs everything until ctx is cancelled; SIGHUP reloads.
func (d *daemon) serve(ctx context.Context) error {
	defer d.prober.Close()
	sub := d.eng.Subscribe(1 << 14)
	d.events.Store(sub)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.eng.Run(runCtx) }()
	go func() { defer wg.Done(); d.logEvents(sub) }()
	httpErr := make(chan error, 1)
	attrs := []slog.Attr{slog.String("config", d.opts.config), slog.String("sip", d.prober.Addr().String())}
	if d.http != nil {
		go func() { httpErr <- d.http.run(runCtx) }()
		attrs = append(attrs, slog.String("http", d.http.URL()))
	}
	d.log.notice(slog.LevelInfo, "started", attrs...)
	err := d.watch(runCtx, httpErr)
	cancel()
	if d.http != nil && err == nil {
		err = <-httpErr
	}
	sub.Close()
	wg.Wait()
	d.log.notice(slog.LevelInfo, "stopped")
	return err
}

// watch reloads on every SIGHUP until ctx is done or the HTTP server
// fails.
func (d *daemon) watch(ctx context.Context, httpErr <-chan error) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-httpErr:
			return err
		case <-hup:
			_ = d.reload(ctx)
		}
	}
}

// logEvents prints every event and the endpoint changes they cause, until
// sub is closed.
func (d *daemon) logEvents(sub *engine.Subscription) {
	var dropped uint64
	for ev := range sub.C {
		d.log.hold()
		d.handle(ev)
		for n := 0; n < maxBurst && len(sub.C) > 0; n++ {
			d.handle(<-sub.C) // only this goroutine receives: not closed yet
		}
		d.log.release()
		if n := sub.Dropped(); n != dropped {
			d.lost(n-dropped, ev.Time)
			dropped = n
		}
	}
}

// maxBurst bounds the events logged in one write.
const maxBurst = 1024

// handle counts, logs and follows one engine event.
func (d *daemon) handle(ev engine.Event) {
	d.metrics.ObserveEvent(ev)
	if ev.Kind == engine.AvailabilityChanged {
		d.endpoints.aorChanged(ev.AoR, ev.Time, d.aorAvailable, d.log.endpoint)
		return
	}
	d.log.event(ev)
}

// lost reports n events the log could not keep up with (the engine never
// waits for its subscribers), and re-reads every endpoint's availability,
// which a lost AoR event may have changed. The API, the event stream and
// the contact gauges read the engine and lose nothing.
func (d *daemon) lost(n uint64, at time.Time) {
	d.log.notice(slog.LevelWarn, fmt.Sprintf("%d events were not logged: the log fell behind (qualifyd_events_dropped_total)", n))
	d.endpoints.resync(at, d.aorAvailable, d.log.endpoint)
}

// The daemon's prober must serve the engine asynchronously, the fast path.
var _ engine.Prober = (*sipprobe.Prober)(nil)

// engineAoR returns the engine's view of the configuration's i-th AoR, in
// place: a copy of a million AoRs was 200 MB of the start's peak RSS
// (issue 7).
func engineAoR(cfg *pjsip.Config) func(i int) *engine.AoR {
	return func(i int) *engine.AoR { return &cfg.AoRs[i].AoR }
}

func countAttrs(cfg *pjsip.Config) []slog.Attr {
	n := 0
	for _, a := range cfg.AoRs {
		n += len(a.Contacts)
	}
	return []slog.Attr{slog.Int("aors", len(cfg.AoRs)), slog.Int("contacts", n)}
}
