package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Engine is what the server needs from *engine.Engine.
type Engine interface {
	ContactsPage(buf []engine.ContactSnapshot, after string, limit int) ([]engine.ContactSnapshot, bool)
	AoRsPage(buf []engine.AoRSnapshot, after string, limit int) ([]engine.AoRSnapshot, bool)
	AoR(name string) (engine.AoRSnapshot, bool)
	History(name string) (engine.History, bool)
	Summary() engine.Summary
	Qualify(ctx context.Context, aor string) ([]engine.ContactResult, error)
	Subscribe(buffer int) *engine.Subscription
	// Now is the engine's time, in which its snapshots give times.
	Now() time.Time
}

// Endpoints is what the server needs from the daemon's endpoint table,
// *endpoint.Table.
type Endpoints interface {
	Page(buf []endpoint.Snapshot, after string, limit int) ([]endpoint.Snapshot, bool)
	Endpoint(name string) (endpoint.Snapshot, bool)
}

// Defaults of the Config fields left zero.
const (
	DefaultRingSize       = 1024
	DefaultHeartbeat      = 15 * time.Second
	DefaultMaxQualifyWait = 60 * time.Second
	DefaultPageLimit      = 2000
	// DefaultMaxStreams bounds the event streams open at once: each holds
	// a connection and a goroutine for as long as its client stays, so an
	// unbounded number lets any client that can reach the API exhaust
	// them. A dashboard or two, a log shipper and some qualifyd show
	// --follow sessions need a few; the rest are refused with 503.
	DefaultMaxStreams = 64
)

// Config configures a Server. Only Engine is required.
type Config struct {
	// Engine is the engine served.
	Engine Engine
	// Endpoints, if set, serves /api/v1/endpoints; nil answers an empty
	// list there and 404 for each name.
	Endpoints Endpoints
	// Sinks, if set, serves /api/v1/sinks; nil answers an empty list.
	Sinks Sinks
	// Sources, if set, returns what /api/v1/sources serves; nil answers
	// an empty list.
	Sources func() []api.Source
	// Cluster, if set, returns this node's view of its cluster for
	// GET /api/v1/cluster; ok is false when qualifyd runs without a
	// type=cluster section, and the route answers 404.
	Cluster func() (view api.Cluster, ok bool)
	// Votes, if set, returns the cluster's status of a contact and each
	// live vantage's vote; ok is false outside cluster mode or for an
	// unknown contact.
	Votes func(aor, uri string) (cluster qualify.Status, votes []api.Vote, ok bool)
	// Reload, if set, reloads the configuration for POST /api/v1/reload;
	// force is the request's ?force=1, which applies a configuration that
	// drops every AoR or most contacts too (qualify-semantics §8). An
	// error is reported to the client as 422 with its text; the running
	// configuration must then stay in force. Nil answers 501.
	Reload func(ctx context.Context, force bool) error
	// Observations, if set, takes the batches of POST
	// /api/v1/observations; nil answers 501 there. If it is an
	// observe.Refuser, it counts the bodies the server drops whole
	// (malformed or oversized).
	Observations observe.Sink
	// Token, if not empty, is the bearer token POST routes require.
	Token string
	// Gatherer, if set, is served at /metrics; nil answers 404 there.
	Gatherer prometheus.Gatherer
	// RingSize is how many events are kept for replay; zero means
	// DefaultRingSize.
	RingSize int
	// Heartbeat is the interval of SSE comment lines keeping idle streams
	// alive; zero means DefaultHeartbeat.
	Heartbeat time.Duration
	// MaxQualifyWait bounds how long POST .../qualify waits for the probes
	// (the AoR's qualify timeout plus a second, at most this); zero means
	// DefaultMaxQualifyWait.
	MaxQualifyWait time.Duration
	// History, if set, is where the status page's charts and change
	// lists come from; nil means Engine when it is a HistorySource (as
	// *engine.Engine is), else the page has no charts.
	History HistorySource
	// PageLimit is how many contacts the status page takes from the
	// engine per hold of its lock while it looks for a page of AoRs; zero
	// means DefaultPageLimit.
	PageLimit int
	// MaxStreams bounds the GET /api/v1/events streams open at once; a
	// request beyond it is answered 503. Zero means DefaultMaxStreams.
	MaxStreams int
	// StreamRefused, if set, is called once per event stream refused
	// because MaxStreams were open (for a metric).
	StreamRefused func()
	// Version is shown on the status page.
	Version string
	// Logger receives handler panics; nil discards them.
	Logger *slog.Logger
	// Panicked, if set, is called once per handler panic (for a metric).
	Panicked func()
}

// Server is the HTTP interface. Create it with New, serve Handler, and run
// Run for the event stream.
type Server struct {
	cfg  Config
	mux  *http.ServeMux
	ring *ring
	sub  *engine.Subscription // consumed by Run
	// streams holds a token per open event stream; its capacity is
	// cfg.MaxStreams.
	streams chan struct{}
	// rates measures the status page's probes per second.
	rates rateWindow
}

// ErrNoEngine is returned by New without an Engine.
var ErrNoEngine = errors.New("web: no engine configured")

// New returns a Server for cfg. It subscribes to the engine's events at
// once, so that none published before Run starts is missed.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, ErrNoEngine
	}
	cfg = withDefaults(cfg)
	s := &Server{cfg: cfg, mux: http.NewServeMux(), streams: make(chan struct{}, cfg.MaxStreams)}
	s.sub = cfg.Engine.Subscribe(cfg.RingSize)
	s.ring = newRing(cfg.RingSize, s.sub.Seq)
	s.routes()
	s.summary(cfg.Engine.Now()) // the first sample of the page's rates
	return s, nil
}

func withDefaults(cfg Config) Config {
	if cfg.RingSize <= 0 {
		cfg.RingSize = DefaultRingSize
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxQualifyWait <= 0 {
		cfg.MaxQualifyWait = DefaultMaxQualifyWait
	}
	if cfg.PageLimit <= 0 {
		cfg.PageLimit = DefaultPageLimit
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Endpoints == nil {
		cfg.Endpoints = noEndpoints{}
	}
	if h, ok := cfg.Engine.(HistorySource); ok && cfg.History == nil {
		cfg.History = h
	}
	return cfg
}

// Handler returns the server's handler: the routes behind panic recovery,
// a request body limit, and JSON answers for unknown routes and methods.
func (s *Server) Handler() http.Handler {
	return s.recover(http.HandlerFunc(s.serve))
}

// maxBody bounds request bodies: POST /api/v1/observations' is the only
// one read.
const maxBody = observe.MaxBody

// serve dispatches r, answering the mux's own 404 and 405 in JSON.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	h, _ := s.mux.Handler(r)
	rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(rec, r)
	for _, k := range []string{"Allow", "Location"} {
		if v := rec.header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	writeError(w, rec.status, http.StatusText(rec.status))
}

// statusRecorder captures the status (and headers) a mux fallback handler
// writes, discarding its plain-text body.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// noEndpoints is the endpoint table of a server configured without one.
type noEndpoints struct{}

func (noEndpoints) Page(buf []endpoint.Snapshot, _ string, _ int) ([]endpoint.Snapshot, bool) {
	return buf[:0], false
}

func (noEndpoints) Endpoint(string) (endpoint.Snapshot, bool) { return endpoint.Snapshot{}, false }
