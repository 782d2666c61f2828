package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sink"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
	"github.com/qualifyd/qualifyd/internal/source"
)

// Daemon is one running qualifyd: configuration, prober, engine, endpoint
// table, sinks, log, metrics and the HTTP front.
type Daemon struct {
	cfg       Config
	log       *Log
	errs      *logWriter // Config.Errors, which must not block either
	prober    *sipprobe.Prober
	eng       *engine.Engine
	endpoints *endpoint.Table
	sinks     *sink.Group
	observer  *observer      // the calls' outcomes in (observe.Sink)
	calls     *sink.Watchers // the ami sinks' calls (observe_calls=yes), into observer
	reg       *prometheus.Registry
	metrics   *metrics.Metrics
	events    *engine.Subscription // the log's
	sinkFeed  *engine.Subscription // the sinks'
	http      *httpFront           // nil without HTTPAddr
	// httpDone is closed by Run when the HTTP front has stopped, httpErr
	// then its error: a closed channel is read by the signal loop and by
	// Run's shutdown alike, whichever of the stop and the front's end the
	// loop saw first.
	httpDone chan struct{}
	httpErr  error
	reloadMu sync.Mutex // one reload at a time; taken before applyMu
	// applyMu guards stopped; a reload applies under it. Run sets
	// stopped before it stops the engine and saves the state, so that no
	// reload applies after the state's last write.
	applyMu sync.Mutex
	stopped bool
	// running counts the AoRs and contacts of the configuration applied
	// last, for the shrink rule; written by apply, under reloadMu after
	// New.
	running  configSize
	state    stateKeeper   // Config.StateFile
	idle     chan struct{} // the log's follower has taken every event
	notified sync.Once     // a failure to notify is logged once
	sources  *source.Keeper
	// sourcesSet wakes the sources' refresh loop after an applied round
	// (capacity 1).
	sourcesSet chan struct{}
	// cluster is this node's part in a cluster; nil for a single node.
	cluster *node
}

// eventBuffer is how many engine events the log (or the sinks) may fall
// behind by before it loses some (the log's are counted in
// qualifyd_events_dropped_total; the sinks re-read every object).
const eventBuffer = 1 << 14

// logBound is how long the log's writer is given at shutdown (and after
// a failed start) to write its last lines before it is abandoned.
const logBound = 2 * time.Second

// New loads the configuration and builds the daemon, each part after what
// it uses: the prober, the metrics' hooks, the engine, the log's and the
// sinks' subscriptions, the scrape-time metrics, the endpoint table, then the
// HTTP front, bound at once. A broken configuration or a busy port stops
// it before anything is sent.
func New(cfg Config) (*Daemon, error) {
	log, err := newLog(orDiscard(cfg.Log), cfg.LogFormat, cfg.LogStamp, cmp.Or(cfg.logBuffer, defaultLogBuffer))
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: log, errs: newLogWriter(orDiscard(cfg.Errors), errorsBuffer), idle: make(chan struct{}, 1),
		sources: newSources(cfg), sourcesSet: make(chan struct{}, 1)}
	if err := d.start(); err != nil {
		d.closeLogs()
		return nil, err
	}
	return d, nil
}

// errorsBuffer is how many bytes of HTTP errors Config.Errors may fall
// behind by before they are dropped.
const errorsBuffer = 64 << 10

// start reads the sources and the configuration and builds the rest of
// the daemon; the sources' lists are kept as the last good ones once the
// configuration they made is applied.
func (d *Daemon) start() error {
	d.restoreSources()
	round := d.sources.Round(context.Background(), true, d.cfg.ReloadAllowShrink)
	conf, err := d.cfg.load(round.Import)
	if err != nil {
		return err
	}
	d.warn(conf)
	d.sourceNotices(round)
	ccfg, clustered, err := ClusterConfig(conf, d.cfg.Node)
	if err != nil {
		return err
	}
	d.readState()
	if d.prober, err = sipprobe.New(sipprobe.Config{ListenAddr: d.cfg.SIPBind}); err != nil {
		return err
	}
	if err := d.build(conf, ccfg, clustered); err != nil {
		d.prober.Close()
		if d.cluster != nil {
			d.cluster.c.Close()
		}
		return err
	}
	d.commitSources(round)
	return nil
}

// closeLogs stops the log's writer, given logBound to write what it
// holds, then the errors' writer (Config.Errors, stderr), given logBound
// too, after it took the notice of the log lines no notice in the log
// counts: with stdout stalled at exit, the drop notice cannot reach the
// log, so it goes where the errors go.
func (d *Daemon) closeLogs() {
	d.log.Close(logBound)
	if n := d.log.Unreported(); n > 0 {
		d.errs.Write(d.log.droppedLine(nil, n))
	}
	d.errs.close(logBound)
}

// build creates everything after the prober, and applies conf; with
// clustered, the node's Cluster (its embedded NATS bound) before the
// sinks, which then follow the cluster's statuses and push only while
// this node leads.
func (d *Daemon) build(conf *pjsip.Config, ccfg cluster.Config, clustered bool) error {
	var err error
	d.reg = prometheus.NewRegistry()
	if d.metrics, err = newMetrics(d.reg, d.cfg); err != nil {
		return err
	}
	d.eng, err = engine.New(engine.Config{Prober: d.prober, MaxInitialQualifyTime: conf.MaxInitialQualifyTime,
		Observe: d.metrics.ObserveProbe, Lateness: d.metrics.ObserveLateness, Coalesce: d.cfg.Coalesce, Rand: d.cfg.Rand, Seq: d.startSeq(),
		HistoryAoRs: d.cfg.HistoryAoRs, HistoryBucket: d.cfg.HistoryBucket})
	if err != nil {
		return err
	}
	d.state.Engine = d.eng
	d.observer = newObserver(d.eng, d.metrics, nil)
	d.events = d.eng.Subscribe(cmp.Or(d.cfg.events, eventBuffer))
	d.sinkFeed = d.eng.Subscribe(cmp.Or(d.cfg.events, eventBuffer))
	if err := watchEngine(d.metrics, d.reg, d.eng, d.prober, d.events, d.logDropped); err != nil {
		return err
	}
	d.endpoints = endpoint.New(d.eng)
	// The sinks read the engine's clock as their wall clock: a probe's
	// end (ContactSnapshot.Last.At) is on it, so that a step of the system
	// clock moves neither.
	scfg := sink.Config{Source: d.eng, Notice: d.log.Notice, Dial: d.cfg.SinkDial, Vouch: d.vouch,
		Clock: sink.Clock{Wall: d.eng.Now}}
	if clustered {
		if d.cluster, err = newNode(d, ccfg, conf.Cluster.Options); err != nil {
			return err
		}
		for _, w := range ClusterWarnings(conf, ccfg) {
			d.log.Notice(slog.LevelWarn, "configuration warning: "+w.Error())
		}
		scfg.Source, scfg.Gate = clusterSource{d.eng, d.cluster.c}, d.cluster.gate
		d.eng.SetProbed(d.cluster.probedBy(d.cluster.assumed()), nil)
		if err := d.metrics.WatchCluster(d.reg, d.cluster.stats); err != nil {
			return err
		}
	}
	d.calls = sink.NewWatchers(d.observer, d.cfg.SinkDial, d.log.Notice)
	scfg.Calls = d.calls.Stats
	d.sinks = sink.NewGroup(scfg)
	if err := watchSinks(d.metrics, d.reg, d.sinks); err != nil {
		return err
	}
	if err := watchSources(d.metrics, d.reg, d.sources); err != nil {
		return err
	}
	if err := d.apply(conf); err != nil {
		return err
	}
	if d.cfg.HTTPAddr == "" {
		return nil
	}
	d.http, err = newHTTPFront(d)
	return err
}

// stalledAfter is how overdue the earliest probe may be before qualifyd
// stops vouching for its verdicts: a running scheduler keeps it within
// tens of milliseconds, even at a million contacts.
const stalledAfter = 10 * time.Second

// vouch is the sinks' check before each heartbeat: an error when the
// scheduler is stuck or, in a cluster, when this node is out of it or
// its votes stall (cluster.Cluster.Vouch), so that the routers fail open
// on verdicts that are no longer being renewed.
func (d *Daemon) vouch() error {
	if late := d.eng.Counters().Overdue; late > cmp.Or(d.cfg.stalledAfter, stalledAfter) {
		return fmt.Errorf("the earliest probe is %v overdue: qualifyd's scheduler is stalled and its verdicts are stale", late.Round(time.Second))
	}
	if d.cluster != nil {
		return d.cluster.c.Vouch()
	}
	return nil
}

// orDiscard is w, or io.Discard when w is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Engine is the daemon's engine.
func (d *Daemon) Engine() *engine.Engine { return d.eng }

// Endpoints is the daemon's endpoint table.
func (d *Daemon) Endpoints() *endpoint.Table { return d.endpoints }

// Sinks is the daemon's sinks.
func (d *Daemon) Sinks() *sink.Group { return d.sinks }

// Log is the daemon's log.
func (d *Daemon) Log() *Log { return d.log }

// URL is where the HTTP front listens ("http://host:port"), or "" without
// HTTP.
func (d *Daemon) URL() string {
	if d.http == nil {
		return ""
	}
	return d.http.URL()
}

// apply hands conf to the engine, the endpoint table and the sinks, then
// returns the parse and reload garbage to the OS: a reload's peak is
// several times what the running table needs. It collects the reader's
// garbage before the engine allocates, so that the engine reuses that
// memory instead of growing the heap next to it (docs/performance.md,
// "The configuration reader and the daemon").
func (d *Daemon) apply(conf *pjsip.Config) error {
	runtime.GC()
	if err := d.eng.ApplyFunc(len(conf.AoRs), engineAoR(conf)); err != nil {
		return err
	}
	d.running = sizeOf(conf)
	changes, lines := d.endpoints.Configure(conf.Endpoints, time.Now())
	d.endpointsChanged(changes)
	for _, c := range lines {
		d.log.endpoint(c, engine.Event{Time: time.Now()})
	}
	d.sinks.Configure(conf)
	d.calls.Configure(conf)
	if d.cluster != nil {
		d.cluster.configured(conf)
	}
	debug.FreeOSMemory()
	return nil
}

// engineAoR returns the engine's view of the configuration's i-th AoR, in
// place: a copy would add a second table of AoRs to the start's peak.
func engineAoR(conf *pjsip.Config) func(i int) *engine.AoR {
	return func(i int) *engine.AoR { return &conf.AoRs[i].AoR }
}

// Reload re-reads the configuration and applies it with the reload rule
// (qualify-semantics §8); on any error the running configuration stays
// and the error is returned (and logged). A configuration that would drop
// every AoR or more than half of the contacts is refused with ErrShrink,
// as an empty or truncated file is valid syntax, unless force or
// Config.ReloadAllowShrink is set. SIGHUP reloads without force.
func (d *Daemon) Reload(ctx context.Context, force bool) error {
	return d.reload(ctx, force, true)
}

// reload re-reads the configuration; with read, every source is read
// again too, else each uses the list its last refresh found.
func (d *Daemon) reload(ctx context.Context, force, read bool) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	round := d.sources.Round(ctx, read, force || d.cfg.ReloadAllowShrink)
	conf, err := d.cfg.load(round.Import)
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if err == nil && d.stopped {
		err = ErrStopping
	}
	if err == nil && !force && !d.cfg.ReloadAllowShrink {
		err = d.running.shrink(sizeOf(conf))
	}
	if err == nil {
		d.warn(conf)
		d.clusterChanged(conf)
		d.sourceNotices(round)
		err = d.apply(conf)
	}
	if err == nil {
		d.commitSources(round)
	}
	if err != nil {
		d.log.Notice(slog.LevelError, "reload failed, keeping the running configuration: "+pjsip.Brief(err))
		return err
	}
	d.log.Notice(slog.LevelInfo, "configuration reloaded", d.running.attrs()...)
	d.notify(d.status())
	return nil
}

// warn logs the configuration's warnings, one line each.
func (d *Daemon) warn(conf *pjsip.Config) {
	for _, w := range conf.Warnings {
		d.log.Notice(slog.LevelWarn, "configuration warning: "+w.Error())
	}
}

// clusterChanged warns when a reload's cluster section is not the one
// the daemon started with: the cluster is built once, at start; the
// files its options name are read again.
func (d *Daemon) clusterChanged(conf *pjsip.Config) {
	var raw []pjsip.ClusterOption
	if d.cluster != nil {
		raw = d.cluster.raw
		d.cluster.reloadFiles()
	}
	if !sameSection(raw, conf.Cluster) {
		d.log.Notice(slog.LevelWarn, "configuration warning: the type=cluster section changed: it applies at the next start (restart qualifyd)")
	}
}

// ErrStopping is a reload refused because the daemon stops: its state
// file is written for the last time.
var ErrStopping = errors.New("qualifyd is stopping")

// ErrShrink is a reload refused because it would drop every AoR or more
// than half of the contacts.
var ErrShrink = errors.New("reload refused")

// configSize is how many AoRs and static contacts a configuration has.
type configSize struct{ aors, contacts int }

func sizeOf(conf *pjsip.Config) configSize {
	n := 0
	for _, a := range conf.AoRs {
		n += len(a.Contacts)
	}
	return configSize{len(conf.AoRs), n}
}

// shrink returns the ErrShrink of replacing the running configuration,
// of size r, by one of size next: no AoR left of some, or fewer than
// half of the contacts.
func (r configSize) shrink(next configSize) error {
	const how = "allow it with --reload-allow-shrink, or once with POST /api/v1/reload?force=1"
	switch {
	case r.aors > 0 && next.aors == 0:
		return fmt.Errorf("%w: the new configuration has no AoR and would drop all %d running (%s)", ErrShrink, r.aors, how)
	case 2*next.contacts < r.contacts:
		return fmt.Errorf("%w: the new configuration has %d contacts and would drop more than half of the %d running (%s)",
			ErrShrink, next.contacts, r.contacts, how)
	}
	return nil
}

func (r configSize) attrs() []slog.Attr {
	return []slog.Attr{slog.Int("aors", r.aors), slog.Int("contacts", r.contacts)}
}

// Run runs everything until ctx is cancelled or the HTTP server fails;
// SIGHUP reloads. With a state file, it restores the saved states before
// the engine's first probe and the HTTP front's first answer, writes the
// file while it runs and once more when the engine has stopped. It closes
// the sockets and the log when it returns, the log's last lines given at
// most logBound; call it once.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.prober.Close()
	defer d.closeLogs()
	// SIGHUP is caught before "started" is logged: a reload asked for
	// once the log says so must not find SIGHUP's default, exit.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d.log.Notice(slog.LevelInfo, "started", d.startAttrs()...)
	var wg sync.WaitGroup
	wg.Go(func() { d.follow(d.events) })
	wg.Go(func() { d.feedSinks(d.sinkFeed) })
	d.restoreState()
	runCtx, cancel := context.WithCancel(ctx)
	if d.cluster != nil {
		wg.Go(func() { d.cluster.feedVerdicts(runCtx) })
		wg.Go(func() { _ = d.cluster.c.Run(runCtx) })
		d.cluster.waitReady(runCtx)
		d.cluster.assignPending()
		wg.Go(func() { d.cluster.runAssign(runCtx) })
		wg.Go(func() { d.cluster.watch(runCtx) })
	}
	d.httpDone = make(chan struct{})
	if d.http != nil {
		go func() { d.httpErr = d.http.run(runCtx); close(d.httpDone) }()
	}
	wg.Go(func() { d.eng.Run(runCtx) })
	wg.Go(func() { d.keepState(runCtx) })
	if d.cluster != nil {
		wg.Go(func() { d.cluster.runSinks(runCtx) })
	} else {
		wg.Go(func() { d.sinks.Run(runCtx) })
		wg.Go(func() { d.calls.Run(runCtx) })
	}
	wg.Go(func() { d.feedWatchdog(runCtx) })
	wg.Go(func() { d.refreshSources(runCtx) })
	d.ready()
	d.watch(runCtx, hup)
	d.notify("STOPPING=1")
	d.applyMu.Lock() // a reload applying ends first; none applies after
	d.stopped = true
	d.applyMu.Unlock()
	cancel()
	if d.http != nil {
		<-d.httpDone
	}
	d.events.Close()
	d.sinkFeed.Close()
	wg.Wait()
	d.saveState()
	d.log.Notice(slog.LevelInfo, "stopped")
	return d.httpErr
}

// startAttrs are the fields of the start-up notice.
func (d *Daemon) startAttrs() []slog.Attr {
	attrs := []slog.Attr{}
	if d.cfg.ConfigFile != "" {
		attrs = append(attrs, slog.String("config", d.cfg.ConfigFile))
	}
	attrs = append(attrs, slog.String("sip", d.prober.Addr().String()))
	if d.http != nil {
		attrs = append(attrs, slog.String("http", d.http.URL()))
	}
	return attrs
}

// watch reloads on every SIGHUP received on hup until ctx is done or the
// HTTP front has stopped.
func (d *Daemon) watch(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.httpDone:
			return
		case <-hup:
			_ = d.Reload(ctx, false)
		}
	}
}

// follow logs every event and follows the endpoints, until sub is
// closed. The sinks follow the engine on a subscription of their own
// (feedSinks), so that nothing here can delay a router.
func (d *Daemon) follow(sub *engine.Subscription) {
	var dropped uint64
	for ev := range sub.C {
		d.handle(ev)
		if len(sub.C) == 0 {
			select {
			case d.idle <- struct{}{}:
			default:
			}
		}
		if n := sub.Dropped(); n != dropped {
			d.lost(n-dropped, ev.Time)
			dropped = n
		}
	}
}

// feedSinks has the sinks recompute what depends on each contact whose
// status changed, or whose run of failures began or ended (the panic's
// census), until sub is closed. It waits on nothing but the
// sinks' lock (never on a router, the log or the endpoint table); when
// sub lost events, the sinks re-read every object and a cluster node
// publishes every vote again (reportAll).
func (d *Daemon) feedSinks(sub *engine.Subscription) {
	var dropped uint64
	for ev := range sub.C {
		switch ev.Kind {
		case engine.StatusChanged:
			if d.cluster != nil {
				d.cluster.report(ev)
			}
			d.sinks.AoRChanged(ev.AoR)
		case engine.DrainChanged:
			if d.cluster != nil {
				d.cluster.report(ev) // the vote carries the drain
			}
			d.sinks.AoRChanged(ev.AoR) // in or out of routing
		case engine.ProbeFailed, engine.FailuresCleared:
			if d.cluster == nil && ev.Failures <= 1 {
				d.sinks.AoRChanged(ev.AoR) // the panic counts a contact failing from its first failed probe
			}
		}
		if n := sub.Dropped(); n != dropped {
			d.log.Notice(slog.LevelWarn, fmt.Sprintf("%d events were missed by the sinks: every object re-read", n-dropped))
			d.sinks.Resync()
			if d.cluster != nil {
				d.cluster.reportAll()
			}
			dropped = n
		}
	}
}

// handle counts, logs and follows one engine event. An endpoint
// line caused by a probe's verdict comes just before the contact's line, as
// Asterisk updates the endpoint before it logs the contact
// (sip_options_contact_status_notify_task); one caused by a reload comes
// after it (sip_options_remove_contact_status).
func (d *Daemon) handle(ev engine.Event) {
	d.metrics.ObserveEvent(ev)
	switch ev.Kind {
	case engine.AvailabilityChanged:
		d.endpointsChanged(d.endpoints.AoRChanged(ev))
	case engine.StatusChanged:
		lines := d.endpoints.ContactChanged(ev)
		if verdict(ev) {
			d.endpointLines(lines, ev)
			d.log.event(ev)
			return
		}
		d.log.event(ev)
		d.endpointLines(lines, ev)
	default:
		d.log.event(ev)
	}
}

// verdict reports whether a status change comes from a probe (to
// Reachable or Unreachable), not from a reload (to Removed or
// NonQualified).
func verdict(ev engine.Event) bool {
	return ev.To == qualify.Reachable || ev.To == qualify.Unreachable
}

// endpointLines logs the endpoint lines caused by ev.
func (d *Daemon) endpointLines(lines []endpoint.LogChange, ev engine.Event) {
	for _, c := range lines {
		d.log.endpoint(c, ev)
	}
}

// endpointsChanged passes the availability changes to
// Config.EndpointChanged.
func (d *Daemon) endpointsChanged(changes []endpoint.Change) {
	if d.cfg.EndpointChanged == nil {
		return
	}
	for _, c := range changes {
		d.cfg.EndpointChanged(c)
	}
}

// lost reports n events the log could not keep up with (the engine never
// waits for its subscribers), and re-reads every endpoint, whose state a
// lost event may have changed. The API, the event stream, the sinks and
// the contact gauges read the engine and lose nothing.
func (d *Daemon) lost(n uint64, at time.Time) {
	d.log.Notice(slog.LevelWarn, fmt.Sprintf("%d events were not logged: the log fell behind (qualifyd_events_dropped_total)", n))
	changes, lines := d.endpoints.Resync(at)
	d.endpointsChanged(changes)
	d.endpointLines(lines, engine.Event{Time: at})
}

// logDropped is how many lines the log and Config.Errors dropped.
func (d *Daemon) logDropped() uint64 { return d.log.Dropped() + d.errs.dropped.Load() }

// The daemon's prober is the engine's.
var _ engine.Prober = (*sipprobe.Prober)(nil)
