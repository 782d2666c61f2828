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

// newMetrics builds a registry with Go and process collectors plus
// qualifyd's series, which read the engine and prober through get once
// they exist; perAoR > 0 enables per-AoR series for that many AoRs.
func newMetrics(get func() (*engine.Engine, *sipprobe.Prober), dropped func() uint64, perAoR int) (*prometheus.Registry, *metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, metrics.Options{
		PerAoR:      perAoR > 0,
		PerAoRLimit: perAoR,
		Summary:     func() engine.Summary { e, _ := get(); return e.Summary() },
		SIP:         func() metrics.SIPStats { _, p := get(); return sipStats(p.Stats()) },
		InFlight:    func() int { e, _ := get(); return e.Counters().InFlight },
		Version:     version(),

		EventsDropped: dropped,
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

// newHTTPFront builds the API of cfg and binds addr, so a busy port fails
// start-up rather than going unnoticed. Handler panics are logged to
// stderr and counted by m.
func newHTTPFront(addr string, cfg web.Config, m *metrics.Metrics) (*httpFront, error) {
	cfg.Version = version()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg.Panicked = m.CountPanic
	api, err := web.New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &httpFront{api: api, srv: web.NewHTTPServer(addr, api.Handler()), ln: ln}, nil
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
