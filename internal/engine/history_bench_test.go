package engine

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// flapping fails every other probe, so that with N = 1 every probe
// changes its contact's status.
type flapping struct{ n atomic.Uint64 }

func (f *flapping) Start(_ context.Context, _ probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	if f.n.Add(1)%2 == 0 {
		done(tag, qualify.Result{Reason: qualify.ReasonTimeout, Detail: "no response"})
		return
	}
	done(tag, qualify.Result{Code: 200, RTT: time.Millisecond})
}

// BenchmarkHistoryMemory measures the heap an AoR's history takes once
// full: 1,000 AoRs of one contact, probed every 30 s for a day and a bit,
// with a history each and without. B/AoR is the difference per AoR when
// every probe changes the contact's status (200 changes kept),
// B/quiet-AoR when only the first does.
func BenchmarkHistoryMemory(b *testing.B) {
	var flapping, quiet float64
	for b.Loop() {
		with, without := dayOfProbes(b, 0, newFlapping()), dayOfProbes(b, -1, newFlapping())
		flapping = float64(with-without) / 1000
		with, without = dayOfProbes(b, 0, instant{}), dayOfProbes(b, -1, instant{})
		quiet = float64(with-without) / 1000
	}
	b.ReportMetric(flapping, "B/AoR")
	b.ReportMetric(quiet, "B/quiet-AoR")
}

func newFlapping() Prober { return &flapping{} }

// dayOfProbes drives 1,000 AoRs with HistoryAoRs set to n and prober p
// through 25 hours and returns the heap in use then, the engine alive.
func dayOfProbes(b *testing.B, n int, p Prober) uint64 {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := New(Config{Prober: p, Now: func() time.Time { return now }, HistoryAoRs: n})
	if err != nil {
		b.Fatal(err)
	}
	pol := referencePolicy()
	pol.Failures = 1
	if err := e.Apply(enginetest.NumberedAoRs(1000, pol)); err != nil {
		b.Fatal(err)
	}
	d := e.Drive(b.Context())
	end := now.Add(25 * time.Hour)
	for now.Before(end) {
		now, _ = d.Next()
		d.StartDue()
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	runtime.KeepAlive(e)
	return m.HeapAlloc
}
