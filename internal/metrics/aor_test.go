package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestPerAoROffByDefault(t *testing.T) {
	m, reg := newMetrics(t, Options{})
	m.ObserveProbe("a", qualify.Result{Code: 200}, true, qualify.ReasonNone)
	if n := testutil.CollectAndCount(reg, "qualifyd_aor_probes_total", "qualifyd_aor_overflow_total"); n != 0 {
		t.Fatalf("%d per-AoR series without PerAoR", n)
	}
}

func TestPerAoRCap(t *testing.T) {
	m, reg := newMetrics(t, Options{PerAoR: true, PerAoRLimit: 2})
	ok := qualify.Result{Code: 200, RTT: time.Millisecond}
	for _, aor := range []string{"a", "b", "c", "a", "d", "c"} {
		m.ObserveProbe(aor, ok, true, qualify.ReasonNone)
	}
	m.ObserveProbe("b", qualify.Result{Reason: qualify.ReasonTimeout}, false, qualify.ReasonTimeout)
	m.ObserveEvent(engine.Event{Kind: engine.StatusChanged, AoR: "e", From: qualify.Reachable, To: qualify.Unreachable})
	want := `
# HELP qualifyd_aor_overflow_total Per-AoR observations recorded under aor="_other" because the per-AoR cap was reached.
# TYPE qualifyd_aor_overflow_total counter
qualifyd_aor_overflow_total 4
# HELP qualifyd_aor_probes_total Applied probes per AoR by result (success, failure).
# TYPE qualifyd_aor_probes_total counter
qualifyd_aor_probes_total{aor="_other",result="failure"} 0
qualifyd_aor_probes_total{aor="_other",result="success"} 3
qualifyd_aor_probes_total{aor="a",result="failure"} 0
qualifyd_aor_probes_total{aor="a",result="success"} 2
qualifyd_aor_probes_total{aor="b",result="failure"} 1
qualifyd_aor_probes_total{aor="b",result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_aor_probes_total", "qualifyd_aor_overflow_total"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.aors.other.changes[qualify.Unreachable]); got != 1 {
		t.Fatalf("_other changes to Unreachable %v", got)
	}
	// 3 aor values x 1 histogram.
	if n := testutil.CollectAndCount(reg, "qualifyd_aor_probe_rtt_seconds"); n != 3 {
		t.Fatalf("%d rtt series, want 3", n)
	}
}

func TestPerAoRDefaultLimit(t *testing.T) {
	if s := newAoRSet(0); s.limit != DefaultPerAoRLimit {
		t.Fatalf("limit %d", s.limit)
	}
}

func TestHooksDoNotAllocate(t *testing.T) {
	m, _ := newMetrics(t, Options{PerAoR: true, PerAoRLimit: 1})
	r := qualify.Result{Code: 200, RTT: time.Millisecond, DNS: time.Millisecond}
	ev := engine.Event{Kind: engine.StatusChanged, AoR: "a", From: qualify.Reachable, To: qualify.Unreachable}
	m.ObserveProbe("a", r, true, qualify.ReasonNone) // first sight of "a" may allocate
	hooks := map[string]func(){
		"known aor":    func() { m.ObserveProbe("a", r, true, qualify.ReasonNone) },
		"capped aor":   func() { m.ObserveProbe("zzz", r, false, qualify.ReasonTimeout) },
		"event":        func() { m.ObserveEvent(ev) },
		"availability": func() { m.ObserveEvent(engine.Event{Kind: engine.AvailabilityChanged}) },
		"lateness":     func() { m.ObserveLateness(time.Millisecond) },
	}
	for name, f := range hooks {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func BenchmarkObserveProbe(b *testing.B) {
	m, err := New(prometheus.NewRegistry(), Options{PerAoR: true})
	if err != nil {
		b.Fatal(err)
	}
	r := qualify.Result{Code: 200, RTT: time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveProbe("pbx07", r, true, qualify.ReasonNone)
		}
	})
}

// probedAoR is a Sources.AoR of AoRs "a" and "b" of two contacts each:
// one never probed, one with statistics (a's better than b's), and "c"
// not configured.
func probedAoR(name string) (engine.AoRSnapshot, bool) {
	st := map[string]engine.Stats{
		"a": {SRTT: 12 * time.Millisecond, RTTMax: 20 * time.Millisecond, Loss: 0.02, LossWindow: 100, Probes: 300, Failures: 9},
		"b": {Loss: 1, LossWindow: 3, Probes: 3, Failures: 3},
	}
	s, ok := st[name]
	if !ok {
		return engine.AoRSnapshot{}, false
	}
	worse := engine.Stats{SRTT: 40 * time.Millisecond, RTTMax: 50 * time.Millisecond, Loss: 0.5, LossWindow: 100, Probes: 100}
	return engine.AoRSnapshot{Name: name, Contacts: []engine.ContactSnapshot{{}, {Stats: s}, {Stats: worse}}}, true
}

// TestPerAoRStats: the statistics' gauges are exported for the AoRs with
// per-AoR series, the best of their contacts, and only with both PerAoR
// and Sources.AoR.
func TestPerAoRStats(t *testing.T) {
	m, reg := newMetrics(t, Options{PerAoR: true})
	if err := m.Watch(reg, Sources{AoR: probedAoR}); err != nil {
		t.Fatal(err)
	}
	for _, aor := range []string{"a", "b", "c"} {
		m.ObserveProbe(aor, qualify.Result{Code: 200, RTT: time.Millisecond}, true, qualify.ReasonNone)
	}
	want := `
# HELP qualifyd_aor_loss_ratio Share of failed probes among the last 100 per AoR: the lowest of its contacts that were probed.
# TYPE qualifyd_aor_loss_ratio gauge
qualifyd_aor_loss_ratio{aor="a"} 0.02
qualifyd_aor_loss_ratio{aor="b"} 0.5
# HELP qualifyd_aor_rtt_srtt_seconds Smoothed RTT (RFC 6298 SRTT) per AoR: the lowest of its contacts that had a success.
# TYPE qualifyd_aor_rtt_srtt_seconds gauge
qualifyd_aor_rtt_srtt_seconds{aor="a"} 0.012
qualifyd_aor_rtt_srtt_seconds{aor="b"} 0.04
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_aor_loss_ratio", "qualifyd_aor_rtt_srtt_seconds"); err != nil {
		t.Fatal(err)
	}
	off, reg2 := newMetrics(t, Options{})
	if err := off.Watch(reg2, Sources{AoR: probedAoR}); err != nil {
		t.Fatal(err)
	}
	off.ObserveProbe("a", qualify.Result{Code: 200}, true, qualify.ReasonNone)
	if n := testutil.CollectAndCount(reg2, "qualifyd_aor_loss_ratio", "qualifyd_aor_rtt_srtt_seconds"); n != 0 {
		t.Fatalf("%d statistics series without PerAoR", n)
	}
}
