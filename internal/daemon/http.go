package daemon

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/sink"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
	"github.com/qualifyd/qualifyd/internal/web"
)

// newMetrics registers the Go and process collectors and qualifyd's
// hook-fed series in reg; cfg.PerAoR > 0 enables per-AoR series for that
// many AoRs.
func newMetrics(reg *prometheus.Registry, cfg Config) (*metrics.Metrics, error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return metrics.New(reg, metrics.Options{PerAoR: cfg.PerAoR > 0, PerAoRLimit: cfg.PerAoR, Version: cfg.Version})
}

// watchEngine registers the series read at scrape time from eng, p, the
// log's subscription sub and logDropped (the log lines dropped).
func watchEngine(m *metrics.Metrics, reg prometheus.Registerer, eng *engine.Engine, p *sipprobe.Prober, sub *engine.Subscription,
	logDropped func() uint64) error {
	return m.Watch(reg, metrics.Sources{
		Summary:       eng.Summary,
		SIP:           func() metrics.SIPStats { return sipStats(p.Stats()) },
		InFlight:      func() int { return eng.Counters().InFlight },
		Calls:         func() (uint64, uint64) { c := eng.Counters(); return c.Quiet, c.Pulled },
		EventsDropped: sub.Dropped,
		LogDropped:    logDropped,
		AoR:           eng.AoR,
	})
}

// watchSinks registers the sink and panic series, read at scrape time
// from g.
func watchSinks(m *metrics.Metrics, reg prometheus.Registerer, g *sink.Group) error {
	err := m.WatchPanic(reg, func() metrics.PanicStats {
		p := g.Panic()
		return metrics.PanicStats{Active: p.Active, Waiting: p.Waiting, Destinations: p.Destinations, Failing: p.Failing, Down: p.Down}
	})
	if err != nil {
		return err
	}
	return m.WatchSinks(reg, func() []metrics.SinkStats {
		st := g.Status()
		out := make([]metrics.SinkStats, len(st))
		for i, s := range st {
			out[i] = metrics.SinkStats{Name: s.Name, Up: s.Up, Pending: s.Pending, LastSuccess: s.LastSuccess,
				OK: s.OK, Error: s.Error, Dropped: s.Dropped}
			if c := s.Calls; c != nil {
				out[i].Calls = &metrics.CallWatchStats{Up: c.Up, Reconnects: c.Reconnects}
			}
		}
		return out
	})
}

// sipStats maps the prober's counters to the metrics' reasons.
func sipStats(s sipprobe.Stats) metrics.SIPStats {
	return metrics.SIPStats{
		Requests:        s.Probes,
		Retransmissions: s.Retransmissions,
		Redials:         s.Redials,
		Dropped: map[string]uint64{
			"late": s.DroppedLate, "duplicate": s.DroppedDuplicate, "wrong_source": s.DroppedWrongSource,
			"mismatch": s.DroppedMismatch, "malformed": s.DroppedMalformed, "oversized": s.DroppedOversized,
			"request": s.DroppedRequests,
		},
	}
}

// httpFront is the daemon's HTTP side: the API server and its listener.
type httpFront struct {
	api *web.Server
	srv *http.Server
	ln  net.Listener
}

// newHTTPFront builds d's API and binds its address (or, with
// HTTPFallback, an ephemeral loopback port when it is busy), so a busy
// port fails start-up rather than going unnoticed. Handler panics and
// the server's own errors are logged to cfg.Errors, through a buffer
// that drops what a stalled reader does not take, and counted.
func newHTTPFront(d *Daemon) (*httpFront, error) {
	api, err := web.New(web.Config{
		Engine: d.eng, Endpoints: d.endpoints, Sinks: d.sinks, Sources: d.sourceList, Reload: d.Reload, Token: d.cfg.Token, Gatherer: d.reg,
		Version: d.cfg.Version, Logger: slog.New(slog.NewTextHandler(d.errs, nil)),
		Panicked: d.metrics.CountPanic, StreamRefused: d.metrics.CountStreamRefused,
		Cluster: d.clusterView, Votes: d.votes,
		Observations: d.observer,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", d.cfg.HTTPAddr)
	if err != nil && d.cfg.HTTPFallback {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, err
	}
	srv := web.NewHTTPServer(d.cfg.HTTPAddr, api.Handler())
	srv.ErrorLog = log.New(d.errs, "", log.LstdFlags)
	return &httpFront{api: api, srv: srv, ln: ln}, nil
}

// run serves until ctx is done, then ends the event streams and shuts the
// server down gracefully.
func (h *httpFront) run(ctx context.Context) error {
	apiCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go h.api.Run(apiCtx)
	errc := make(chan error, 1)
	go func() { errc <- h.srv.Serve(h.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	cancel() // end SSE streams first, or Shutdown waits for them
	sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := h.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// URL is where the API listens.
func (h *httpFront) URL() string { return "http://" + h.ln.Addr().String() }
