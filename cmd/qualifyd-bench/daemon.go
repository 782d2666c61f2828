package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// daemonReport is what `qualifyd-bench daemon` measures of a real
// `qualifyd run` process: everything an operator's machine pays, the
// reading of pjsip.conf, the log, the metrics and the HTTP front
// included, which `scale` (the engine and prober in this process) leaves
// out. GOGC is the environment's ("": the daemon's own default, 50);
// lateness is the upper bound of the histogram bucket holding the
// quantile.
type daemonReport struct {
	Contacts        int     `json:"contacts"`
	FrequencyS      float64 `json:"frequency_s"`
	DurationS       float64 `json:"duration_s"`
	DeadShare       float64 `json:"dead_share"`
	GOGC            string  `json:"gogc"`
	ConfigBytes     int64   `json:"config_bytes"`
	StartSeconds    float64 `json:"start_seconds"`
	ProbesPerSecond float64 `json:"probes_per_second"`
	Failures        uint64  `json:"failures"`
	LatenessP50LeMs float64 `json:"lateness_p50_le_ms"`
	LatenessP99LeMs float64 `json:"lateness_p99_le_ms"`
	CPUUsPerProbe   float64 `json:"cpu_us_per_probe"`
	CPUCores        float64 `json:"cpu_cores"`
	RSSBytes        int64   `json:"rss_bytes"`
	RSSPerContact   float64 `json:"rss_bytes_per_contact"`
	HeapPerContact  float64 `json:"heap_bytes_per_contact"`
	StartPeakPer    float64 `json:"rss_peak_start_bytes_per_contact"`
	ReloadSeconds   float64 `json:"reload_seconds"`
	ReloadPeakPer   float64 `json:"rss_peak_reload_bytes_per_contact"`
	LogLines        int64   `json:"log_lines"`
	// EventsDropped is qualifyd_events_dropped_total at the end of the
	// window: events the log did not get (each drop is also one warning
	// line), so log_lines falls short of one per status change by it.
	EventsDropped float64 `json:"events_dropped"`
}

// daemonOpts are the flags of `qualifyd-bench daemon`.
type daemonOpts struct {
	bin       string
	contacts  int
	freq, dur time.Duration
	warmup    time.Duration
	timeout   time.Duration
	deadShare float64
}

// runDaemon is `qualifyd-bench daemon`.
func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o daemonOpts
	fs.StringVar(&o.bin, "qualifyd", "bin/qualifyd", "the qualifyd binary to run")
	fs.IntVar(&o.contacts, "contacts", 100_000, "number of contacts (one AoR each)")
	fs.DurationVar(&o.freq, "frequency", 60*time.Second, "qualify_frequency of every contact (whole seconds)")
	fs.DurationVar(&o.dur, "duration", 30*time.Second, "measured window, after the warm-up")
	fs.DurationVar(&o.warmup, "warmup", 70*time.Second, "wait after the start before the window (the first round of probes, and its log lines, comes within one frequency)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "qualify_timeout")
	fs.Float64Var(&o.deadShare, "dead-share", 0, "share of contacts that never answer, 0..1")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sc := scaleOpts{contacts: o.contacts, freq: o.freq, deadShare: o.deadShare, sockets: 16}
	if err := sc.check(); err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench daemon:", err)
		return 2
	}
	rep, err := benchDaemon(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench daemon:", err)
		return 1
	}
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintln(stdout, string(b))
	return 0
}

// benchDaemon writes a pjsip.conf of o.contacts AoRs on the responder's
// sockets, runs qualifyd on it, and measures it from outside: /proc for
// memory and CPU, /metrics for probes and lateness, the API for a reload.
func benchDaemon(ctx context.Context, o daemonOpts) (daemonReport, error) {
	rep := daemonReport{Contacts: o.contacts, FrequencyS: o.freq.Seconds(), DurationS: o.dur.Seconds(),
		DeadShare: o.deadShare, GOGC: os.Getenv("GOGC")}
	pop := &population{n: o.contacts, deadShare: o.deadShare}
	dead := 0
	if pop.deadCount() > 0 {
		dead = 4
	}
	resp, err := startResponder(ctx, 16, dead)
	if err != nil {
		return rep, err
	}
	defer resp.stop()
	pop.live, pop.dead = resp.ports.Live, resp.ports.Dead
	dir, err := os.MkdirTemp("", "qualifyd-bench-daemon")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "qualifyd.conf")
	if rep.ConfigBytes, err = writeConfig(conf, pop, o); err != nil {
		return rep, err
	}
	d, err := startDaemon(ctx, o.bin, conf)
	if err != nil {
		return rep, err
	}
	defer d.stop()
	if rep.StartSeconds, err = d.waitReady(ctx); err != nil {
		return rep, err
	}
	rep.StartPeakPer = float64(procStatusOf(d.pid(), "VmHWM:")) / float64(o.contacts)
	if !sleepCtx(ctx, o.warmup) {
		return rep, ctx.Err()
	}
	if err := d.window(ctx, o.dur, &rep); err != nil {
		return rep, err
	}
	rep.RSSBytes = procStatusOf(d.pid(), "VmRSS:")
	rep.RSSPerContact = float64(rep.RSSBytes) / float64(o.contacts)
	t0 := time.Now()
	if err := d.post("/api/v1/reload"); err != nil {
		return rep, fmt.Errorf("reload: %w", err)
	}
	rep.ReloadSeconds = time.Since(t0).Seconds()
	rep.ReloadPeakPer = float64(procStatusOf(d.pid(), "VmHWM:")) / float64(o.contacts)
	rep.LogLines = d.lines.n.Load()
	return rep, nil
}

// writeConfig writes one AoR per contact, named after its URI's user
// part, and returns the file's size.
func writeConfig(path string, pop *population, o daemonOpts) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	timeout := strconv.FormatFloat(o.timeout.Seconds(), 'f', -1, 64)
	freq := strconv.Itoa(int(o.freq.Seconds()))
	for i := range pop.n {
		u := pop.uri(i)
		name := u[4:strings.IndexByte(u, '@')]
		fmt.Fprintf(w, "[%s]\ntype=aor\ncontact=%s\nqualify_frequency=%s\nqualify_timeout=%s\n\n", name, u, freq, timeout)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// daemonChild is a running `qualifyd run`.
type daemonChild struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	lines  *lineCounter
	start  time.Time
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited
}

// startDaemon runs bin on conf with the HTTP front on a free loopback
// port; the child inherits the environment (GOGC, GOMEMLIMIT).
func startDaemon(ctx context.Context, bin, conf string) (*daemonChild, error) {
	return startDaemonLog(ctx, bin, conf, nil)
}

// startDaemonLog is startDaemon with the daemon's log also written to
// log (nil: only counted) and extra arguments to `qualifyd run`.
func startDaemonLog(ctx context.Context, bin, conf string, log io.Writer, extra ...string) (*daemonChild, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	d := &daemonChild{base: "http://" + addr, lines: &lineCounter{}, start: time.Now()}
	args := append([]string{"run", "--config", conf, "--http", addr, "--sip-bind", "127.0.0.1:0"}, extra...)
	d.cmd = exec.CommandContext(ctx, bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = io.Writer(d.lines), os.Stderr
	if log != nil {
		d.cmd.Stdout = io.MultiWriter(d.lines, log)
	}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	d.exited = make(chan struct{})
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	return d, nil
}

func (d *daemonChild) pid() int { return d.cmd.Process.Pid }

// stop ends the daemon as systemd would, with SIGTERM.
func (d *daemonChild) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
}

// waitReady polls /healthz until it answers (the daemon serves HTTP only
// once its configuration is loaded) and returns the seconds since start.
func (d *daemonChild) waitReady(ctx context.Context) (float64, error) {
	for {
		res, err := http.Get(d.base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return time.Since(d.start).Seconds(), nil
			}
		}
		select {
		case <-d.exited:
			return 0, fmt.Errorf("qualifyd exited before answering /healthz: %v", d.err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *daemonChild) post(path string) error {
	res, err := http.Post(d.base+path, "application/json", nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("%s: %s: %s", path, res.Status, b)
	}
	return nil
}

// daemonSample is the daemon's counters at one instant.
type daemonSample struct {
	at       time.Time
	cpu      time.Duration
	probes   float64
	failures float64
	heap     float64
	dropped  float64
	lateness *dto.Histogram
}

func (d *daemonChild) sample() (daemonSample, error) {
	s := daemonSample{at: time.Now(), cpu: time.Duration(procTicks(d.pid())) * time.Second / 100}
	fams, err := d.metrics()
	if err != nil {
		return s, err
	}
	for _, m := range fams["qualifyd_probes_total"].GetMetric() {
		s.probes += m.GetCounter().GetValue()
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" && l.GetValue() == "failure" {
				s.failures += m.GetCounter().GetValue()
			}
		}
	}
	if ms := fams["qualifyd_schedule_lateness_seconds"].GetMetric(); len(ms) == 1 {
		s.lateness = ms[0].GetHistogram()
	}
	if ms := fams["go_memstats_heap_alloc_bytes"].GetMetric(); len(ms) == 1 {
		s.heap = ms[0].GetGauge().GetValue()
	}
	if ms := fams["qualifyd_events_dropped_total"].GetMetric(); len(ms) == 1 {
		s.dropped = ms[0].GetCounter().GetValue()
	}
	return s, nil
}

// metrics scrapes the daemon's /metrics.
func (d *daemonChild) metrics() (map[string]*dto.MetricFamily, error) {
	res, err := http.Get(d.base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	return fams, nil
}

// window measures the daemon over dur into rep.
func (d *daemonChild) window(ctx context.Context, dur time.Duration, rep *daemonReport) error {
	s0, err := d.sample()
	if err != nil {
		return err
	}
	if !sleepCtx(ctx, dur) {
		return ctx.Err()
	}
	s1, err := d.sample()
	if err != nil {
		return err
	}
	wall, cpu, probes := s1.at.Sub(s0.at), s1.cpu-s0.cpu, s1.probes-s0.probes
	rep.ProbesPerSecond = probes / wall.Seconds()
	rep.Failures = uint64(s1.failures - s0.failures)
	rep.CPUUsPerProbe = float64(cpu.Microseconds()) / math.Max(probes, 1)
	rep.CPUCores = cpu.Seconds() / wall.Seconds()
	rep.HeapPerContact = s1.heap / float64(rep.Contacts)
	rep.EventsDropped = s1.dropped
	rep.LatenessP50LeMs = bucketQuantileMs(s0.lateness, s1.lateness, 0.5)
	rep.LatenessP99LeMs = bucketQuantileMs(s0.lateness, s1.lateness, 0.99)
	return nil
}

// bucketQuantileMs returns the upper bound, in milliseconds, of the
// histogram bucket holding quantile q of the observations between a and
// b: the daemon exports lateness in 1-2-5 buckets, so this is "at most".
func bucketQuantileMs(a, b *dto.Histogram, q float64) float64 {
	if a == nil || b == nil {
		return math.NaN()
	}
	total := float64(b.GetSampleCount() - a.GetSampleCount())
	for i, bb := range b.GetBucket() {
		n := float64(bb.GetCumulativeCount() - a.GetBucket()[i].GetCumulativeCount())
		if n >= q*total {
			return bb.GetUpperBound() * 1000
		}
	}
	return math.Inf(1)
}

// lineCounter counts the lines written to it and discards them; a test
// can wait for a count.
type lineCounter struct {
	n      atomic.Int64
	mu     sync.Mutex
	target int64
	reach  chan struct{} // closed when n reaches target
}

func (c *lineCounter) Write(b []byte) (int, error) {
	n := c.n.Add(int64(bytes.Count(b, []byte{'\n'})))
	c.mu.Lock()
	if c.reach != nil && n >= c.target {
		close(c.reach)
		c.reach = nil
	}
	c.mu.Unlock()
	return len(b), nil
}

// await returns a channel closed once n lines have been written.
func (c *lineCounter) await(n int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n.Load() >= n {
		close(ch)
		return ch
	}
	c.target, c.reach = n, ch
	return ch
}
