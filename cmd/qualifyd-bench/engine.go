package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// engineReport is what `qualifyd-bench engine` measures.
type engineReport struct {
	Contacts        int     `json:"contacts"`
	FrequencyS      float64 `json:"frequency_s"`
	DurationS       float64 `json:"duration_s"`
	ProbesPerSecond float64 `json:"probes_per_second"`
	ExpectedPerSec  float64 `json:"expected_probes_per_second"`
	LatenessP50Ms   float64 `json:"lateness_p50_ms"`
	LatenessP99Ms   float64 `json:"lateness_p99_ms"`
	LatenessMaxMs   float64 `json:"lateness_max_ms"`
	CPUUsPerProbe   float64 `json:"cpu_us_per_probe"`
	CPUCores        float64 `json:"cpu_cores"`
	HeapPerContact  float64 `json:"heap_bytes_per_contact"`
	LoadSeconds     float64 `json:"load_seconds"`
}

// instantProber answers every probe with 200 OK before its Start returns:
// the engine's own cost, with no network.
type instantProber struct{}

func (instantProber) Start(_ context.Context, _ probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	done(tag, qualify.Result{Sent: time.Now(), Code: 200})
}

// latencies collects probe start lateness, in nanoseconds, while recording.
type latencies struct {
	on  atomic.Bool
	mu  sync.Mutex
	ns  []int64
	hit atomic.Int64
}

func (l *latencies) observe(d time.Duration) {
	if !l.on.Load() {
		return
	}
	l.hit.Add(1)
	l.mu.Lock()
	l.ns = append(l.ns, int64(d))
	l.mu.Unlock()
}

func runEngine(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("contacts", 100_000, "number of contacts")
	freq := fs.Duration("frequency", 60*time.Second, "qualify_frequency of every contact")
	dur := fs.Duration("duration", 30*time.Second, "measured window, after a 2 s warm-up")
	perAoR := fs.Int("per-aor", 1, "contacts per AoR")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rep, err := benchEngine(ctx, *n, *perAoR, *freq, *dur)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench engine:", err)
		return 1
	}
	printEngine(stdout, rep, *asJSON)
	return 0
}

func benchEngine(ctx context.Context, n, perAoR int, freq, dur time.Duration) (engineReport, error) {
	rep := engineReport{Contacts: n, FrequencyS: freq.Seconds(), DurationS: dur.Seconds(),
		ExpectedPerSec: float64(n) / freq.Seconds()}
	lat := &latencies{}
	heap0 := heapInUse()
	e, err := engine.New(engine.Config{Prober: instantProber{}, Lateness: lat.observe})
	if err != nil {
		return rep, err
	}
	t0 := time.Now()
	if err := e.Apply(syntheticAoRs(n, perAoR, freq)); err != nil {
		return rep, err
	}
	rep.LoadSeconds = time.Since(t0).Seconds()
	rep.HeapPerContact = float64(heapInUse()-heap0) / float64(n)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if !sleepCtx(ctx, 2*time.Second) {
		return rep, ctx.Err()
	}
	measure(ctx, e, lat, dur, &rep)
	runtime.KeepAlive(e)
	return rep, ctx.Err()
}

// measure records one window of dur into rep.
func measure(ctx context.Context, e *engine.Engine, lat *latencies, dur time.Duration, rep *engineReport) {
	c0, cpu0, w0 := probesDone(e), cpuTime(), time.Now()
	lat.on.Store(true)
	sleepCtx(ctx, dur)
	lat.on.Store(false)
	probes, cpu, wall := probesDone(e)-c0, cpuTime()-cpu0, time.Since(w0)
	rep.ProbesPerSecond = float64(probes) / wall.Seconds()
	rep.CPUUsPerProbe = float64(cpu.Microseconds()) / float64(max(probes, 1))
	rep.CPUCores = cpu.Seconds() / wall.Seconds()
	lat.mu.Lock()
	defer lat.mu.Unlock()
	slices.Sort(lat.ns)
	rep.LatenessP50Ms = quantileMs(lat.ns, 0.50)
	rep.LatenessP99Ms = quantileMs(lat.ns, 0.99)
	rep.LatenessMaxMs = quantileMs(lat.ns, 1)
}

func syntheticAoRs(n, perAoR int, freq time.Duration) []engine.AoR {
	p := qualify.DefaultPolicy()
	p.Frequency = freq
	perAoR = max(perAoR, 1)
	aors := make([]engine.AoR, 0, n/perAoR+1)
	for i := 0; i < n; i += perAoR {
		a := engine.AoR{Name: "aor" + strconv.Itoa(i), Policy: &p}
		for j := i; j < min(n, i+perAoR); j++ {
			a.Contacts = append(a.Contacts, "sip:c"+strconv.Itoa(j)+"@127.0.0.1:5060")
		}
		aors = append(aors, a)
	}
	return aors
}

func probesDone(e *engine.Engine) uint64 {
	var s uint64
	for _, v := range e.Counters().Probes {
		s += v
	}
	return s
}

func quantileMs(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / 1e6
}

// heapInUse returns the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func printEngine(w io.Writer, r engineReport, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "contacts %d, F %.0fs, window %.0fs, instant fake prober\n", r.Contacts, r.FrequencyS, r.DurationS)
	fmt.Fprintf(w, "  probes/s          %10.0f (expected %.0f)\n", r.ProbesPerSecond, r.ExpectedPerSec)
	fmt.Fprintf(w, "  lateness p50/p99/max  %.3f / %.3f / %.3f ms\n", r.LatenessP50Ms, r.LatenessP99Ms, r.LatenessMaxMs)
	fmt.Fprintf(w, "  CPU per probe     %10.2f us (%.3f cores)\n", r.CPUUsPerProbe, r.CPUCores)
	fmt.Fprintf(w, "  heap per contact  %10.0f B\n", r.HeapPerContact)
	fmt.Fprintf(w, "  load              %10.3f s\n", r.LoadSeconds)
}
