package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// scaleReport is what `qualifyd-bench scale` measures.
type scaleReport struct {
	Contacts            int     `json:"contacts"`
	FrequencyS          float64 `json:"frequency_s"`
	DurationS           float64 `json:"duration_s"`
	DeadShare           float64 `json:"dead_share"`
	ExpectedPerSec      float64 `json:"expected_probes_per_second"`
	ProbesPerSecond     float64 `json:"probes_per_second"`
	FalseTimeouts       uint64  `json:"false_timeouts"`
	DeadTimeouts        uint64  `json:"dead_timeouts"`
	LatenessP50Ms       float64 `json:"lateness_p50_ms"`
	LatenessP99Ms       float64 `json:"lateness_p99_ms"`
	LatenessMaxMs       float64 `json:"lateness_max_ms"`
	CPUUsPerProbe       float64 `json:"cpu_us_per_probe"`
	CPUCores            float64 `json:"cpu_cores"`
	RSSBytesPerContact  float64 `json:"rss_bytes_per_contact"`
	RSSPeakPerContact   float64 `json:"rss_peak_bytes_per_contact"`
	HeapLivePerContact  float64 `json:"heap_live_bytes_per_contact"`
	AllocBytesPerProbe  float64 `json:"alloc_bytes_per_probe"`
	MaxGoroutines       int     `json:"max_goroutines"`
	LoadSeconds         float64 `json:"load_seconds"`
	ReloadSeconds       float64 `json:"reload_seconds"`
	ReloadLatenessMaxMs float64 `json:"reload_lateness_max_ms"`
	ResponderAnswered   uint64  `json:"responder_answered"`
	FloorUsPerProbe     float64 `json:"floor_us_per_probe"`

	KamailioCPUUsPerProbe   float64 `json:"kamailio_cpu_us_per_probe,omitempty"`
	KamailioCPUCores        float64 `json:"kamailio_cpu_cores,omitempty"`
	KamailioProbesPerSecond float64 `json:"kamailio_probes_per_second,omitempty"`
	KamailioFalseTimeouts   *uint64 `json:"kamailio_false_timeouts,omitempty"`
	KamailioRatio           float64 `json:"kamailio_cpu_ratio,omitempty"`
}

// scaleOpts are the flags of `qualifyd-bench scale`.
type scaleOpts struct {
	contacts   int
	freq, dur  time.Duration
	warmup     time.Duration
	timeout    time.Duration
	deadShare  float64
	compare    string
	sockets    int
	cpuprofile string
	memprofile string
}

// runScale is `qualifyd-bench scale`; `scale responder` is the responder
// child it starts.
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "responder" {
		return runResponder(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o scaleOpts
	fs.IntVar(&o.contacts, "contacts", 100_000, "number of contacts")
	fs.DurationVar(&o.freq, "frequency", 60*time.Second, "qualify_frequency of every contact (whole seconds)")
	fs.DurationVar(&o.dur, "duration", 30*time.Second, "measured window, after the warm-up")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "warm-up before the window (after load and reload)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "qualify_timeout (and Kamailio's fr_timer)")
	fs.Float64Var(&o.deadShare, "dead-share", 0, "share of contacts that never answer, 0..1")
	fs.StringVar(&o.compare, "compare", "", `"kamailio": also measure Kamailio's dispatcher probing the same contacts`)
	fs.IntVar(&o.sockets, "sockets", 16, "responder sockets for live contacts")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured window to this file")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile at the end of the window to this file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench scale:", err)
		return 2
	}
	rep, err := benchScale(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench scale:", err)
		return 1
	}
	printScale(stdout, rep, *asJSON)
	return 0
}

func (o *scaleOpts) check() error {
	switch {
	case o.contacts < 1:
		return errors.New("--contacts must be at least 1")
	case o.freq < time.Second || o.freq%time.Second != 0:
		return errors.New("--frequency must be whole seconds")
	case o.deadShare < 0 || o.deadShare > 1:
		return errors.New("--dead-share must be in 0..1")
	case o.compare != "" && o.compare != "kamailio":
		return fmt.Errorf("--compare %q: only kamailio is known", o.compare)
	case o.sockets < 1:
		return errors.New("--sockets must be at least 1")
	}
	return nil
}

// population is the contacts of a run: which are dead, and their URIs.
type population struct {
	n         int
	deadShare float64
	live      []netip.AddrPort
	dead      []netip.AddrPort
}

// isDead spreads the dead contacts evenly over the indexes.
func (p *population) isDead(i int) bool {
	return int(float64(i+1)*p.deadShare) > int(float64(i)*p.deadShare)
}

// uri returns contact i's URI: user "c<i>" on a live socket, "d<i>" on a
// silent one.
func (p *population) uri(i int) string {
	if p.isDead(i) {
		return "sip:d" + strconv.Itoa(i) + "@" + p.dead[i%len(p.dead)].String()
	}
	return "sip:c" + strconv.Itoa(i) + "@" + p.live[i%len(p.live)].String()
}

// uris returns every contact's URI.
func (p *population) uris() []string {
	out := make([]string, p.n)
	for i := range out {
		out[i] = p.uri(i)
	}
	return out
}

func (p *population) aors(policy qualify.Policy) []engine.AoR {
	out := make([]engine.AoR, p.n)
	for i := range out {
		u := p.uri(i)
		out[i] = engine.AoR{Name: u[4:], Contacts: []string{u}, Policy: &policy}
	}
	return out
}

func (p *population) deadCount() int {
	return int(float64(p.n) * p.deadShare)
}

func benchScale(ctx context.Context, o scaleOpts) (scaleReport, error) {
	rep := scaleReport{Contacts: o.contacts, FrequencyS: o.freq.Seconds(), DurationS: o.dur.Seconds(),
		DeadShare: o.deadShare, ExpectedPerSec: float64(o.contacts) / o.freq.Seconds()}
	floor, err := floorUsPerProbe(480, 200_000)
	if err != nil {
		return rep, fmt.Errorf("floor: %w", err)
	}
	rep.FloorUsPerProbe = floor
	pop := &population{n: o.contacts, deadShare: o.deadShare}
	dead := 0
	if pop.deadCount() > 0 {
		dead = 4
	}
	resp, err := startResponder(ctx, o.sockets, dead)
	if err != nil {
		return rep, err
	}
	defer resp.stop()
	pop.live, pop.dead = resp.ports.Live, resp.ports.Dead
	return rep, benchQualifyd(ctx, o, pop, resp, &rep)
}

// tally counts the verdicts of applied probes.
type tally struct {
	falseTimeouts, deadTimeouts atomic.Uint64
}

func (t *tally) observe(aor string, _ qualify.Result, ok bool, _ qualify.Reason) {
	switch {
	case ok:
	case strings.HasPrefix(aor, "d"):
		t.deadTimeouts.Add(1)
	default:
		t.falseTimeouts.Add(1)
	}
}

// benchQualifyd runs the real engine and UDP prober against the responder.
func benchQualifyd(ctx context.Context, o scaleOpts, pop *population, resp *child, rep *scaleReport) error {
	lat, rl, tl := &histogram{}, &histogram{}, &tally{}
	prober, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer prober.Close()
	late := func(d time.Duration) { lat.observe(d); rl.observe(d) }
	e, err := engine.New(engine.Config{Prober: prober, Lateness: late, Observe: tl.observe})
	if err != nil {
		return err
	}
	rss0, live0 := vmRSS(), heapLive()
	policy := qualify.DefaultPolicy()
	policy.Frequency, policy.Timeout = o.freq, o.timeout
	if rep.LoadSeconds, err = timedApply(e, pop.aors(policy)); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if !sleepCtx(ctx, time.Second) {
		return ctx.Err()
	}
	if rep.ReloadSeconds, rep.ReloadLatenessMaxMs, err = timedReload(ctx, e, pop.aors(policy), rl); err != nil {
		return err
	}
	m := &meter{e: e, prober: prober, resp: resp, lat: lat}
	warmup := o.warmup
	if o.compare == "kamailio" {
		if m.kam, err = startKamailio(pop.uris(), o.freq, o.timeout); err != nil {
			return fmt.Errorf("kamailio: %w", err)
		}
		defer m.kam.stop()
		debug.FreeOSMemory() // the dispatcher list built here is not qualifyd's
		// Dispatcher sends each interval's probes in one burst: wait for
		// a round to be under way before measuring.
		warmup = max(warmup, o.freq+3*time.Second)
	}
	if !sleepCtx(ctx, warmup) {
		return ctx.Err()
	}
	if err := m.window(ctx, o, rep); err != nil {
		return err
	}
	rep.RSSBytesPerContact = float64(vmRSS()-rss0) / float64(o.contacts)
	rep.RSSPeakPerContact = float64(procStatus("VmHWM:")-rss0) / float64(o.contacts)
	rep.HeapLivePerContact = float64(heapLive()-live0) / float64(o.contacts)
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return err
		}
	}
	rep.FalseTimeouts, rep.DeadTimeouts = tl.falseTimeouts.Load(), tl.deadTimeouts.Load()
	if m.kam == nil {
		return nil
	}
	// After the memory figures: the RPC answer is large and not qualifyd's.
	ft, err := m.kam.timeouts(func(u string) bool { return strings.HasPrefix(u, "sip:c") })
	rep.KamailioFalseTimeouts = &ft
	return err
}

// timedApply applies aors and returns how long it took. Then, as a daemon
// should after loading a configuration, it returns the garbage of the
// load (the parsed configuration, the replaced AoRs: about as large as the
// engine's state) to the operating system, instead of leaving the heap
// sized for the peak until the next collections.
func timedApply(e *engine.Engine, aors []engine.AoR) (float64, error) {
	t0 := time.Now()
	err := e.Apply(aors)
	took := time.Since(t0).Seconds()
	debug.FreeOSMemory()
	return took, err
}

// timedReload applies aors to the running engine, as timedApply does,
// and returns how long it took and the latest start of a probe, against
// its due time, from the reload until a second after it: no probe starts
// while the engine puts the new set in place, so this is the pause an
// operator's reload costs the probes.
func timedReload(ctx context.Context, e *engine.Engine, aors []engine.AoR, rl *histogram) (float64, float64, error) {
	rl.on.Store(true)
	took, err := timedApply(e, aors)
	if err != nil {
		return 0, 0, err
	}
	if !sleepCtx(ctx, time.Second) { // the probes the reload held back start now
		return 0, 0, ctx.Err()
	}
	rl.on.Store(false)
	return took, rl.maxMs(), nil
}

// meter measures a window of a run: qualifyd (this process: the engine
// and the prober) and, when compared, Kamailio probing the same responder
// at the same time.
type meter struct {
	e      *engine.Engine
	prober *sipprobe.Prober
	resp   *child
	lat    *histogram
	kam    *kamailio // nil without --compare
}

// sample is the meter's counters at one instant.
type sample struct {
	at                 time.Time
	cpu, kamCPU        time.Duration
	allocs             uint64 // bytes allocated on qualifyd's heap
	probes             uint64 // applied by the engine
	sent               uint64 // first transmissions by qualifyd's prober
	answered, received uint64 // at the responder: answered, and all requests
}

func (m *meter) sample() (sample, error) {
	s := sample{at: time.Now(), cpu: cpuTime(), probes: probesDone(m.e), sent: m.prober.Stats().Probes, allocs: heapAllocs()}
	if m.kam != nil {
		s.kamCPU = m.kam.cpu()
	}
	a, d, _, err := m.resp.counts()
	s.answered, s.received = a, a+d
	return s, err
}

// window measures one window of o.dur into rep. Kamailio, when compared,
// runs during the same window: both pay the same machine at the same
// moment, so the ratio does not move with the load of the shared host,
// which can drift by half within an hour. Kamailio's probes
// are counted where they arrive, at the responder, minus qualifyd's:
// dispatcher sends each interval's probes in one burst, so counting its
// transactions at creation would count a burst whose CPU falls outside
// the window. (Without dead destinations nothing is retransmitted: one
// request is one probe.)
func (m *meter) window(ctx context.Context, o scaleOpts, rep *scaleReport) error {
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	s0, err := m.sample()
	if err != nil {
		return err
	}
	m.lat.on.Store(true)
	rep.MaxGoroutines = sampleGoroutines(ctx, o.dur)
	m.lat.on.Store(false)
	s1, err := m.sample()
	if err != nil {
		return err
	}
	wall := s1.at.Sub(s0.at)
	probes, cpu := s1.probes-s0.probes, s1.cpu-s0.cpu
	rep.ResponderAnswered = s1.answered - s0.answered
	rep.ProbesPerSecond = float64(probes) / wall.Seconds()
	rep.CPUUsPerProbe = float64(cpu.Microseconds()) / float64(max(probes, 1))
	rep.CPUCores = cpu.Seconds() / wall.Seconds()
	rep.AllocBytesPerProbe = float64(s1.allocs-s0.allocs) / float64(max(probes, 1))
	rep.LatenessP50Ms, rep.LatenessP99Ms, rep.LatenessMaxMs = m.lat.quantileMs(0.5), m.lat.quantileMs(0.99), m.lat.maxMs()
	if m.kam == nil {
		return nil
	}
	kamProbes := (s1.received - s0.received) - min(s1.sent-s0.sent, s1.received-s0.received)
	kamCPU := s1.kamCPU - s0.kamCPU
	rep.KamailioProbesPerSecond = float64(kamProbes) / wall.Seconds()
	rep.KamailioCPUUsPerProbe = float64(kamCPU.Microseconds()) / float64(max(kamProbes, 1))
	rep.KamailioCPUCores = kamCPU.Seconds() / wall.Seconds()
	if rep.CPUUsPerProbe > 0 {
		rep.KamailioRatio = rep.KamailioCPUUsPerProbe / rep.CPUUsPerProbe
	}
	return nil
}

// sampleGoroutines waits d and returns the most goroutines seen, sampled
// every 100 ms.
func sampleGoroutines(ctx context.Context, d time.Duration) int {
	end := time.Now().Add(d)
	most := runtime.NumGoroutine()
	for time.Now().Before(end) {
		if !sleepCtx(ctx, min(100*time.Millisecond, time.Until(end))) {
			break
		}
		most = max(most, runtime.NumGoroutine())
	}
	return most
}

// vmRSS returns the process's resident set size from /proc/self/status.
func vmRSS() int64 { return procStatus("VmRSS:") }

// procStatus returns a size field of /proc/self/status in bytes.
func procStatus(field string) int64 { return procStatusFile("/proc/self/status", field) }

// procStatusOf returns a size field of process pid's status in bytes.
func procStatusOf(pid int, field string) int64 {
	return procStatusFile("/proc/"+strconv.Itoa(pid)+"/status", field)
}

func procStatusFile(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// heapLive collects and returns the live heap. The collection is forced:
// a steady prober makes little garbage, so the last collection on its own
// may be a minute old, from the load or a burst of the warm-up, and would
// report what was live then, not now. It runs after the RSS
// figures are taken, which it would lower.
func heapLive() int64 {
	runtime.GC()
	return int64(readBytes("/gc/heap/live:bytes"))
}

// heapAllocs returns the bytes allocated on the heap so far: its growth
// over the window is the garbage the collector must take back, which sets
// how far RSS rises above the live heap.
func heapAllocs() uint64 { return readBytes("/gc/heap/allocs:bytes") }

// readBytes returns the runtime/metrics counter name, 0 if it is unknown.
func readBytes(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func printScale(w io.Writer, r scaleReport, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "contacts %d (%.0f%% dead), F %.0fs, window %.0fs, engine + UDP prober against a responder process\n",
		r.Contacts, r.DeadShare*100, r.FrequencyS, r.DurationS)
	fmt.Fprintf(w, "  probes/s              %10.0f (expected %.0f)\n", r.ProbesPerSecond, r.ExpectedPerSec)
	fmt.Fprintf(w, "  false timeouts        %10d (dead contacts' timeouts %d)\n", r.FalseTimeouts, r.DeadTimeouts)
	fmt.Fprintf(w, "  lateness p50/p99/max  %.3f / %.3f / %.3f ms\n", r.LatenessP50Ms, r.LatenessP99Ms, r.LatenessMaxMs)
	fmt.Fprintf(w, "  CPU per probe         %10.2f us (%.3f cores)\n", r.CPUUsPerProbe, r.CPUCores)
	fmt.Fprintf(w, "  RSS per contact       %10.0f B (live heap %.0f B; peak RSS during load/reload %.0f B)\n",
		r.RSSBytesPerContact, r.HeapLivePerContact, r.RSSPeakPerContact)
	fmt.Fprintf(w, "  allocated per probe   %10.0f B (garbage for the collector)\n", r.AllocBytesPerProbe)
	fmt.Fprintf(w, "  goroutines (max)      %10d\n", r.MaxGoroutines)
	fmt.Fprintf(w, "  load / reload         %.3f / %.3f s (probes started up to %.0f ms late meanwhile)\n", r.LoadSeconds, r.ReloadSeconds, r.ReloadLatenessMaxMs)
	fmt.Fprintf(w, "  floor (kernel send+recv, batched) %.2f us per probe\n", r.FloorUsPerProbe)
	if r.KamailioFalseTimeouts != nil {
		fmt.Fprintf(w, "  kamailio dispatcher: %.2f us per probe (%.3f cores, %.0f probes/s), false timeouts %d; ratio %.1fx\n",
			r.KamailioCPUUsPerProbe, r.KamailioCPUCores, r.KamailioProbesPerSecond, *r.KamailioFalseTimeouts, r.KamailioRatio)
	}
}
