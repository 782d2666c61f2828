package state

import (
	"context"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// idleProber never runs: the benchmark's engine is not started.
type idleProber struct{}

func (idleProber) Start(context.Context, probe.Target, uint64, func(uint64, qualify.Result)) {}

// BenchmarkStateWrite1M writes the state of a million probed contacts
// (enginetest.NumberedAoRs, each restored with a result) to a file in
// the test's directory, through the engine's SavedPage as the daemon
// does, fsync and rename included. It reports ns/contact, B/contact (the
// file's size) and lock-wait-s, the longest a stand-in scheduler waited
// for the engine's lock meanwhile. Run it with -benchtime=3x.
func BenchmarkStateWrite1M(b *testing.B) {
	const n = 1_000_000
	e := probed(b, n)
	path := filepath.Join(b.TempDir(), "state")
	stop := enginetest.WatchLock(func() { _ = e.Summary() }, nil)
	var st Stats
	for b.Loop() {
		var err error
		if st, err = Write(path, Header{Written: time.Now(), Seq: e.Seq()}, Pages(e), Histories(e)); err != nil {
			b.Fatal(err)
		}
	}
	wait := stop()
	if st.Contacts != n {
		b.Fatalf("wrote %d contacts", st.Contacts)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/contact")
	b.ReportMetric(float64(st.Bytes)/n, "B/contact")
	b.ReportMetric(wait.Seconds(), "lock-wait-s")
}

// dayOfStats are the statistics of a contact after a day of probes at
// F = 60 s, a few of them lost.
var dayOfStats = engine.Stats{SRTT: 12500 * time.Microsecond, RTTVar: 1100 * time.Microsecond, RTTMin: 10900 * time.Microsecond,
	RTTMax: 48200 * time.Microsecond, Probes: 1440, Failures: 3, LossBits: [2]uint64{1 << 17, 0}}

// probed returns an engine, not running, with n contacts, each restored
// Reachable with a result of a second ago.
func probed(b *testing.B, n int) *engine.Engine {
	b.Helper()
	e, err := engine.New(engine.Config{Prober: idleProber{}})
	if err != nil {
		b.Fatal(err)
	}
	p := qualify.Policy{Frequency: 60 * time.Second, Timeout: 3 * time.Second}
	aors := enginetest.NumberedAoRs(n, p)
	if err := e.Apply(aors); err != nil {
		b.Fatal(err)
	}
	saved := make([]engine.Saved, n)
	at := time.Now().Add(-time.Second)
	for i, a := range aors {
		saved[i] = engine.Saved{AoR: a.Name, URI: a.Contacts[0], Policy: a.Policy, Probe: &probe.Options{},
			State: qualify.State{Status: qualify.Reachable}, Last: engine.LastResult{At: at, OK: true, Code: 200}, RTT: 12500 * time.Microsecond,
			Stats: dayOfStats}
	}
	if r := e.Restore(saved, nil); r.Restored != n {
		b.Fatalf("restored %+v", r)
	}
	return e
}

// BenchmarkStateRead1M reads back the file of BenchmarkStateWrite1M.
func BenchmarkStateRead1M(b *testing.B) {
	const n = 1_000_000
	e := probed(b, n)
	path := filepath.Join(b.TempDir(), "state")
	if _, err := Write(path, Header{Written: time.Now()}, Pages(e), Histories(e)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Read(path)
		if err != nil || len(f.Contacts) != n {
			b.Fatal(len(f.Contacts), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/contact")
}

// BenchmarkStateRestore1M is a start's cost of the state file of a
// million contacts: reading it and restoring it into an engine that has
// just applied the same AoRs (the engine's lock is held throughout, before
// the first probe).
func BenchmarkStateRestore1M(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), "state")
	if _, err := Write(path, Header{Written: time.Now()}, Pages(probed(b, n)), nil); err != nil {
		b.Fatal(err)
	}
	p := qualify.Policy{Frequency: 60 * time.Second, Timeout: 3 * time.Second}
	aors := enginetest.NumberedAoRs(n, p)
	for b.Loop() {
		b.StopTimer()
		e, _ := engine.New(engine.Config{Prober: idleProber{}})
		if err := e.Apply(aors); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		f, err := Read(path)
		if err != nil {
			b.Fatal(err)
		}
		if r := e.Restore(f.Contacts, f.Seal); r.Restored != n {
			b.Fatalf("restored %+v", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/contact")
}

// flapping answers every other probe, at once, and times out the others,
// so that with N = 1 every probe changes its contact's status.
type flapping struct{ n atomic.Uint64 }

func (f *flapping) Start(_ context.Context, _ probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	if f.n.Add(1)%2 == 0 {
		done(tag, qualify.Result{Reason: qualify.ReasonTimeout, Detail: "no response"})
		return
	}
	done(tag, qualify.Result{Code: 200, RTT: time.Duration(10000+f.n.Load()%5000) * time.Microsecond})
}

// BenchmarkStateHistories measures what the histories add to a state
// file: 1,000 AoRs of one contact probed every 30 s for a day and a bit,
// each changing status at every probe (so each has 1440 buckets and 200
// changes). It reports B/AoR, the file's size with the histories less
// its size without, per AoR.
func BenchmarkStateHistories(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := engine.New(engine.Config{Prober: &flapping{}, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	p := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 1}
	if err := e.Apply(enginetest.NumberedAoRs(1000, p)); err != nil {
		b.Fatal(err)
	}
	d := e.Drive(b.Context())
	for end := now.Add(25 * time.Hour); now.Before(end); {
		now, _ = d.Next()
		d.StartDue()
	}
	var with, without Stats
	for b.Loop() {
		with, err = Encode(io.Discard, Header{Written: now}, Pages(e), Histories(e))
		if err != nil {
			b.Fatal(err)
		}
	}
	if without, err = Encode(io.Discard, Header{Written: now}, Pages(e), nil); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(with.Bytes-without.Bytes)/1000, "B/AoR")
}
