package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
	"github.com/qualifyd/qualifyd/internal/web"
)

// newMetrics builds the daemon's registry: Go and process collectors plus
// qualifyd's own series, which read the engine through d once it exists.
func newMetrics(d *daemon, version string) (*prometheus.Registry, *metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, metrics.Options{
		PerAoR:      d.opts.perAoR > 0,
		PerAoRLimit: d.opts.perAoR,
		Summary:     func() engine.Summary { return d.eng.Summary() },
		SIP:         func() metrics.SIPStats { return sipStats(d.prober.Stats()) },
		InFlight:    func() int { return d.eng.Counters().InFlight },
		Version:     version,
	})
	return reg, m, err
}

// sipStats maps the prober's counters to the metrics' reasons.
func sipStats(s sipprobe.Stats) metrics.SIPStats {
	return metrics.SIPStats{
		Requests:        s.Probes,
		Retransmissions: s.Retransmissions,
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

// newHTTPFront builds the API on the engine and binds its address, so a
// busy port fails start-up rather than going unnoticed.
func newHTTPFront(d *daemon, reg prometheus.Gatherer, m *metrics.Metrics, version string) (*httpFront, error) {
	api, err := web.New(web.Config{
		Engine: d.eng, Reload: d.reload, Token: d.opts.token, Gatherer: reg, Version: version,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Panicked: m.CountPanic,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", d.opts.httpAddr)
	if err != nil {
		return nil, err
	}
	return &httpFront{api: api, srv: web.NewHTTPServer(d.opts.httpAddr, api.Handler()), ln: ln}, nil
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

// URL is where the API listens, for the start-up notice.
func (h *httpFront) URL() string { return "http://" + h.ln.Addr().String() }
