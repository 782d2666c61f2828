package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// reply is what the fake peer does with one probe.
type reply = enginetest.Reply

// fakeProber answers probes by a script of (uri, offset since t0), each
// from a goroutine of its own at the script's time, as a real prober's
// receive or timer goroutine would, and records when each probe was sent.
type fakeProber struct {
	t0     time.Time
	script func(uri string, at time.Duration) reply

	mu   sync.Mutex
	sent []sentProbe
}

type sentProbe struct {
	uri string
	at  time.Duration
}

func (f *fakeProber) Start(ctx context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	at := time.Since(f.t0)
	r := f.script(t.URI, at)
	f.mu.Lock()
	f.sent = append(f.sent, sentProbe{t.URI, at})
	f.mu.Unlock()
	enginetest.Start(ctx, t, r, tag, done)
}

// sentTo returns the send offsets of the probes to uri.
func (f *fakeProber) sentTo(uri string) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, s := range f.sent {
		if s.uri == uri {
			out = append(out, s.at)
		}
	}
	return out
}

// harness is an engine running in a synctest bubble with a fake prober and
// a subscription that records every event.
type harness struct {
	t      *testing.T
	t0     time.Time
	e      *Engine
	prober *fakeProber
	sub    *Subscription
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	events []Event
}

// newHarness starts an engine whose first probes are due at once (the random
// first delay is pinned to 0 unless cfg.Rand is set).
func newHarness(t *testing.T, cfg Config, script func(uri string, at time.Duration) reply) *harness {
	t.Helper()
	h := &harness{t: t, t0: time.Now(), done: make(chan struct{})}
	h.prober = &fakeProber{t0: h.t0, script: script}
	cfg.Prober = h.prober
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0 }
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	h.sub = e.Subscribe(1 << 16)
	ctx, cancel := context.WithCancel(t.Context())
	h.cancel = cancel
	go func() { e.Run(ctx); close(h.done) }()
	go h.record()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) record() {
	for ev := range h.sub.C {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	}
}

// stop cancels the engine and waits for it; idempotent.
func (h *harness) stop() {
	h.cancel()
	<-h.done
	h.sub.Close()
}

// apply loads aors or fails the test.
func (h *harness) apply(aors ...AoR) {
	h.t.Helper()
	if err := h.e.Apply(aors); err != nil {
		h.t.Fatal(err)
	}
}

// until advances virtual time to offset d from t0 and lets every goroutine
// settle.
func (h *harness) until(d time.Duration) {
	time.Sleep(h.t0.Add(d).Sub(time.Now()))
	synctest.Wait()
}

// eventsOf returns the recorded events of kind k (all kinds when k is 0).
func (h *harness) eventsOf(k EventKind) []Event {
	synctest.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, ev := range h.events {
		if k == 0 || ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func durations(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = secs(s)
	}
	return out
}
