package web

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
)

// TestMetricsRoute wires the metrics hooks into a running engine as the
// daemon does and reads the exposition through GET /metrics.
func TestMetricsRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		v := newEnv(t, Config{Gatherer: reg, Panicked: m.CountPanic},
			engine.Config{Observe: m.ObserveProbe, Lateness: m.ObserveLateness})
		e := v.e
		if err := m.Watch(reg, metrics.Sources{Summary: e.Summary}); err != nil {
			t.Fatal(err)
		}
		v.prober.set(gw2URI, reply{Silent: true})
		v.prober.set(gw3URI, reply{After: 5 * time.Millisecond, Code: 503})
		v.prober.set(bakURI, reply{Silent: true})
		if err := e.Apply(scenario()); err != nil {
			t.Fatal(err)
		}
		v.until(9 * time.Second)
		w := v.do("GET", "/metrics")
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
			t.Fatalf("got %d %q", w.Code, w.Header().Get("Content-Type"))
		}
		for _, line := range []string{
			`qualifyd_contacts{status="NonQualified"} 1`,
			`qualifyd_contacts{status="Reachable"} 1`,
			`qualifyd_contacts{status="Unreachable"} 3`,
			`qualifyd_contacts_routable 3`,
			`qualifyd_aors 4`,
			`qualifyd_aors_available 3`,
			`qualifyd_probes_total{reason="none",result="success"} 1`,
			`qualifyd_probes_total{reason="timeout",result="failure"} 3`,
			`qualifyd_probes_total{reason="status",result="failure"} 1`,
			`qualifyd_probe_rtt_seconds_count 1`,
			`qualifyd_probe_rtt_seconds_sum 0.0125`,
			`qualifyd_schedule_lateness_seconds_count 5`,
			`qualifyd_http_panics_total 0`,
		} {
			if !strings.Contains(w.Body.String(), "\n"+line+"\n") {
				t.Errorf("exposition lacks %q", line)
			}
		}
	})
}

// TestStreamRefusedMetric wires the refusal counter as the daemon does:
// a stream over the cap shows in the exposition.
func TestStreamRefusedMetric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		v := newEnv(t, Config{Gatherer: reg, MaxStreams: 1, StreamRefused: m.CountStreamRefused}, engine.Config{})
		_, stop := v.openStream("/api/v1/events")
		defer stop()
		if w := v.do("GET", "/api/v1/events"); w.Code != 503 {
			t.Fatalf("second stream: %d, want 503", w.Code)
		}
		line := "\nqualifyd_http_event_streams_refused_total 1\n"
		if w := v.do("GET", "/metrics"); !strings.Contains(w.Body.String(), line) {
			t.Fatalf("exposition lacks %q", line)
		}
	})
}
