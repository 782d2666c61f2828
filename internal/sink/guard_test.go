package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// startGuard runs a guard of the sink "pbx" over f, managing pbx07 and
// pbx08, checking every second.
func startGuard(t *testing.T, f *fakeManager, endpoints func() (map[string]bool, error)) (*notes, func()) {
	log := &notes{}
	if endpoints == nil {
		endpoints = func() (map[string]bool, error) { return map[string]bool{"pbx07": true, "pbx08": true}, nil }
	}
	g := &Guard{Name: "pbx", AMI: newAMI(f, "s3cret", true), Endpoints: endpoints, Interval: time.Second, Notice: log.notice}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	return log, func() { cancel(); <-done }
}

func (f *fakeManager) set(m map[string]string, k, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m[k] = v
}

// TestGuardReleasesWhenTheHeartbeatIsStale: while failopen_at is ahead
// the guard changes nothing; the first second past it, it turns
// maintenance off for the sink's endpoints (not for an endpoint the sink
// does not manage) and logs it once; a fresh deadline is logged once and
// leaves maintenance alone.
func TestGuardReleasesWhenTheHeartbeatIsStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.db["qualifyd/failopen_at"] = itoa(time.Now().Unix() + 3)
		f.maint["pbx07"], f.maint["pbx08"], f.maint["manual"] = "on", "on", "on"
		log, stop := startGuard(t, f, nil)
		defer stop()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "on" || len(log.all()) != 0 {
			t.Fatalf("pbx07 %q with the deadline ahead; log %q", got, log.all())
		}
		time.Sleep(time.Second) // now = failopen_at + 1
		synctest.Wait()
		for ep, want := range map[string]string{"pbx07": "off", "pbx08": "off", "manual": "on"} {
			if got := f.get(f.maint, ep); got != want {
				t.Errorf("%s maintenance %q, want %q", ep, got, want)
			}
		}
		want := "guard: sink pbx: the heartbeat is stale: failopen_at " + itoa(time.Now().Unix()-1) +
			" passed 1 s ago: maintenance off for 2 endpoints: pbx07, pbx08"
		if got := log.all(); len(got) != 1 || got[0] != want {
			t.Fatalf("log %q, want %q", got, want)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := len(log.all()); n != 1 {
			t.Fatalf("%d lines: a stale episode with nothing to release logs once", n)
		}
		f.set(f.db, "qualifyd/failopen_at", itoa(time.Now().Unix()+30))
		f.set(f.maint, "pbx07", "on")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "on" {
			t.Fatalf("pbx07 %q: a fresh heartbeat leaves maintenance to qualifyd", got)
		}
		if got := log.all(); len(got) != 2 || got[1] != "guard: sink pbx: the heartbeat is fresh again: qualifyd steers maintenance" {
			t.Fatalf("log %q", got)
		}
	})
}

// TestGuardLineCountsAManyEndpointRelease: a guard that releases 500
// endpoints releases them all, pipelined, an endpoint Asterisk refuses
// (ghost, in the first window) logged on its own and the others released
// past it, and logs one short line: the count and the first ten names,
// sorted, and how many more.
func TestGuardLineCountsAManyEndpointRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		managed := map[string]bool{}
		for i := range 500 {
			name := fmt.Sprintf("trunk%03d", i)
			managed[name], f.maint[name] = true, "on"
		}
		managed["ghost"], f.maint["ghost"] = true, "on"
		log, stop := startGuard(t, f, func() (map[string]bool, error) { return managed, nil })
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		for name := range managed {
			if got := f.get(f.maint, name); got != "off" && name != "ghost" {
				t.Fatalf("%s maintenance %q, want off", name, got)
			}
		}
		want := "guard: sink pbx: no heartbeat deadline (qualifyd/failopen_at) in astdb: maintenance off for 500 endpoints: " +
			"trunk000, trunk001, trunk002, trunk003, trunk004, trunk005, trunk006, trunk007, trunk008, trunk009 and 490 more"
		ghost := "guard: sink pbx: endpoint ghost: PJSIPSetMaintenance: Endpoint 'ghost' not found"
		if got := log.all(); len(got) < 2 || got[0] != ghost || got[1] != want {
			t.Fatalf("log %q, want %q then %q (and the refusal again at each round)", got, ghost, want)
		}
	})
}

// TestGuardWithoutDeadlineFailsOpen: no failopen_at in astdb (qualifyd
// never beat, or the value is not a number) is stale; the sink's
// endpoints are read at the start of the episode, and a configuration
// that cannot be read keeps the ones read before.
func TestGuardWithoutDeadlineFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.maint["pbx07"] = "on"
		reads := 0
		log, stop := startGuard(t, f, func() (map[string]bool, error) {
			reads++
			if reads > 1 {
				return nil, errors.New("qualifyd.conf:3: broken")
			}
			return map[string]bool{"pbx07": true}, nil
		})
		defer stop()
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "off" {
			t.Fatalf("pbx07 %q without a deadline", got)
		}
		if got := log.all(); len(got) != 1 || !strings.HasPrefix(got[0], "guard: sink pbx: no heartbeat deadline (qualifyd/failopen_at) in astdb: maintenance off for 1 endpoint: pbx07") {
			t.Fatalf("log %q", got)
		}
		f.set(f.db, "qualifyd/failopen_at", itoa(time.Now().Unix()+2))
		time.Sleep(time.Second)
		synctest.Wait()
		f.set(f.db, "qualifyd/failopen_at", "soon")
		f.set(f.maint, "pbx07", "on")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "off" || reads != 2 {
			t.Fatalf("pbx07 %q after %d reads: a deadline that is not a number vouches for nothing", got, reads)
		}
	})
}

// TestGuardReconnects: a Manager that cuts the connection is logged once
// and reconnected at the next round.
func TestGuardReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.cut = "DBGet"
		f.maint["pbx07"] = "on"
		log, stop := startGuard(t, f, nil)
		defer stop()
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "on" || len(log.all()) != 1 || !strings.Contains(log.all()[0], "DBGet") {
			t.Fatalf("pbx07 %q; log %q", got, log.all())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "off" || f.dials != 2 {
			t.Fatalf("pbx07 %q after %d dials", got, f.dials)
		}
		if got := log.all(); len(got) != 3 || got[1] != "guard: sink pbx: connected" {
			t.Fatalf("log %q", got)
		}
	})
}

// TestMaintenanceFailsOpenWhenQualifydDies: the sink and the guard on one
// Manager. While the sink runs, its heartbeat holds the endpoint in
// maintenance; a release behind its back is read back and undone at the
// next beat. When the sink stops dead (no clean-up: kill -9), the guard
// releases the endpoint once failopen_after has passed.
func TestMaintenanceFailsOpenWhenQualifydDies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.split, f.noisy = true, true // lists read a byte at a time, among others' replies and events
		a := newAMI(f, "s3cret", true)
		a.Maintenance, a.FailOpenAfter = true, 3*time.Second
		r := newReconciler("pbx", maintenance{a}, Intervals{Heartbeat: time.Second, Resync: time.Second}, nil, half)
		r.Set(Key{Kind: KindDevice, Name: "pbx07"}, Down, 0)
		stopSink := start(t, r)
		_, stopGuard := startGuard(t, f, nil)
		defer stopGuard()
		synctest.Wait()
		f.set(f.maint, "pbx07", "off") // an operator, or the guard after a stall
		time.Sleep(time.Second)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "on" {
			t.Fatalf("pbx07 %q: the sink must read the release back and undo it", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "on" {
			t.Fatalf("pbx07 %q while the heartbeat is fresh", got)
		}
		stopSink() // closes the connection and nothing else, as a kill -9 does
		killed := time.Now()
		for f.get(f.maint, "pbx07") == "on" {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if d := time.Since(killed); d > 5*time.Second {
			t.Fatalf("released %v after the sink died, want within failopen_after (3 s) + 2 s", d)
		}
	})
}

// TestMaintenanceLogsEndpoints: a method=maintenance sink's log names
// what Asterisk holds, an endpoint in maintenance or out of it, not a
// device that is down.
func TestMaintenanceLogsEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []string
		f := newFakeManager("s3cret")
		a := newAMI(f, "s3cret", true)
		a.Maintenance = true
		r := newReconciler("pbx", maintenance{a}, Intervals{Heartbeat: time.Second, Resync: time.Second},
			func(_ slog.Level, msg string, _ ...slog.Attr) {
				mu.Lock()
				lines = append(lines, msg)
				mu.Unlock()
			}, half)
		stop := start(t, r)
		defer stop()
		r.Set(Key{Kind: KindDevice, Name: "aor0005"}, Down, 0)
		synctest.Wait()
		r.Set(Key{Kind: KindDevice, Name: "aor0005"}, Up, 0)
		synctest.Wait()
		want := []string{"sink pbx: endpoint aor0005 is now in maintenance in the router",
			"sink pbx: endpoint aor0005 is now out of maintenance in the router"}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(lines, want) {
			t.Fatalf("logged %q, want %q", lines, want)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
