//go:build !race

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDaemonSmoke runs the real daemon, `qualifyd run` (QUALIFYD_BIN, or
// built here), on a generated pjsip.conf of 100,000 contacts, 10% of them
// silent, against responders in the test's process, and checks what an operator
// would, correctness only: every contact logged once, in the
// status its peer deserves, every event either logged or counted as
// dropped, RSS under 1 KiB per contact beside the histories' bound
// (over the RSS of the same binary on one contact: the code and the
// runtime it links), a reload through the API logged,
// and a clean stop. It asserts no timing; waits are on the daemon's log
// lines, with generous bounds against a hang.
func TestDaemonSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon on 100,000 contacts for about 15 s")
	}
	const n = 100_000
	bin := qualifydBinary(t)
	ctx := t.Context()
	base := baseRSS(t, bin)
	pop := smokePopulation(t, n) // in this process: a re-executed test binary would run the tests
	conf := filepath.Join(t.TempDir(), "qualifyd.conf")
	if _, err := writeConfig(conf, pop, daemonOpts{freq: 10 * time.Second, timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	d, err := startDaemon(ctx, bin, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	if _, err := d.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// "started", then one status line per contact within the first round.
	awaitLines(t, d, n+1, 2*time.Minute)
	m := scrape(t, d)
	dead := float64(pop.deadCount())
	if got := m[`qualifyd_contacts{status="Reachable"}`]; got != n-dead {
		t.Errorf("%v contacts Reachable, want %v", got, n-dead)
	}
	if got := m[`qualifyd_contacts{status="Unreachable"}`]; got != dead {
		t.Errorf("%v contacts Unreachable, want %v", got, dead)
	}
	if got, ok := m["qualifyd_events_dropped_total"]; !ok || got != 0 {
		t.Errorf("qualifyd_events_dropped_total %v (exported: %v), want 0", got, ok)
	}
	if got, ok := m["qualifyd_log_lines_dropped_total"]; !ok || got != 0 {
		t.Errorf("qualifyd_log_lines_dropped_total %v (exported: %v), want 0: the test reads every line", got, ok)
	}
	if rss := procStatusOf(d.pid(), "VmRSS:") - base; rss >= 1024*n+historyBound {
		t.Errorf("RSS %d B over the %d B of one contact, %d B per contact, want under 1 KiB per contact and %d MiB of histories",
			rss, base, rss/n, historyBound>>20)
	}
	if err := d.post("/api/v1/reload"); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, d, n+2, time.Minute) // "configuration reloaded"
	d.stop()
	if d.err != nil {
		t.Errorf("qualifyd exited with %v after SIGTERM", d.err)
	}
}

// baseRSS is the RSS of bin running one contact, once it is logged: what
// the binary's code, data and runtime take whatever the contacts.
func baseRSS(t *testing.T, bin string) int64 {
	t.Helper()
	pop := smokePopulation(t, 1)
	conf := filepath.Join(t.TempDir(), "one.conf")
	if _, err := writeConfig(conf, pop, daemonOpts{freq: 10 * time.Second, timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	d, err := startDaemon(t.Context(), bin, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	if _, err := d.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, d, 2, time.Minute) // "started", the contact's line
	return procStatusOf(d.pid(), "VmRSS:")
}

// historyBound is what the histories of the default --history-aors
// (1000 AoRs) may take beside the contacts: at most 35 KiB each, a day's
// buckets and 200 changes (README, "History and statistics").
const historyBound = 1000 * 35 << 10

// qualifydBinary returns QUALIFYD_BIN, or builds cmd/qualifyd for the test.
func qualifydBinary(t *testing.T) string {
	if bin := os.Getenv("QUALIFYD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "qualifyd")
	if out, err := exec.Command("go", "build", "-o", bin, "../qualifyd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// awaitLines waits until the daemon has logged n lines; limit only stops
// a hung run.
func awaitLines(t *testing.T, d *daemonChild, n int64, limit time.Duration) {
	t.Helper()
	bound := time.NewTimer(limit)
	defer bound.Stop()
	select {
	case <-d.lines.await(n):
	case <-d.exited:
		t.Fatalf("qualifyd exited (%v) after %d log lines, want %d", d.err, d.lines.n.Load(), n)
	case <-bound.C:
		t.Fatalf("%d log lines after %v, want %d; metrics: %v", d.lines.n.Load(), limit, n, scrape(t, d))
	}
}

// scrape returns the daemon's qualifyd_* gauge and counter values by
// series, e.g. `qualifyd_contacts{status="Reachable"}`.
func scrape(t *testing.T, d *daemonChild) map[string]float64 {
	t.Helper()
	fams, err := d.metrics()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + `="` + l.GetValue() + `"}`
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
