package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// stopGrace is how long a process gets after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// lossyRun is one run of the experiment: its lab, processes and phases.
type lossyRun struct {
	s        settings
	lab      netLab
	files    map[string]string // generated files by short name
	tr       *tracker
	procs    []*proc
	phases   []phase
	current  impairment // the path's impairment now
	notes    []string   // things that went differently than planned
	progress io.Writer
}

// preflight checks root and the tools, so a missing one is a clear error.
func preflight(s settings) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces and nftables)")
	}
	var missing []string
	for _, tool := range []string{"ip", "nft", "sipp", "kamailio"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(s.Qualifyd); err != nil {
		missing = append(missing, s.Qualifyd)
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v (Debian: apt-get install iproute2 nftables sip-tester kamailio; make build)", missing)
	}
	return nil
}

// lossy runs the whole experiment and returns its report. The namespaces
// and every process are gone when it returns, whatever happened.
func lossy(ctx context.Context, s settings, progress io.Writer) (rep report, err error) {
	if err := s.validate(); err != nil {
		return report{}, err
	}
	if err := preflight(s); err != nil {
		return report{}, err
	}
	r := &lossyRun{s: s, lab: newNetLab(os.Getpid()), tr: newTracker(), progress: progress}
	if r.files, err = s.writeFiles(); err != nil {
		return report{}, err
	}
	removeStale(ctx)
	defer func() { err = errors.Join(err, r.teardown()) }()
	if err := r.lab.up(ctx); err != nil {
		return report{}, err
	}
	if err := r.startAll(); err != nil {
		return report{}, err
	}
	if err := r.runPhases(ctx); err != nil {
		return report{}, err
	}
	r.stopAll() // their logs are complete once they have exited
	preds, err := r.predict(ctx)
	if err != nil {
		return report{}, err
	}
	return buildReport(r.s, r.phases, r.tr.transitions(), preds, r.notes), nil
}

// teardown stops every process and removes the lab.
func (r *lossyRun) teardown() error {
	r.stopAll()
	return r.lab.down()
}

// stopAll stops every started process, newest first.
func (r *lossyRun) stopAll() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop(stopGrace)
	}
}

// logFile creates name in the run's directory.
func (r *lossyRun) logFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(r.s.Dir, name))
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// start starts one process and keeps it for stopping.
func (r *lossyRun) start(name, ns string, out io.Writer, argv ...string) error {
	p, err := startProc(name, ns, out, argv...)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	return nil
}

// startAll starts SIPp in the responder's namespace, then qualifyd and
// Kamailio in the prober's. Their log files stay open until exit.
func (r *lossyRun) startAll() error {
	for _, start := range []func() error{r.startSIPp, r.startQualifyd, r.startKamailio} {
		if err := start(); err != nil {
			return err
		}
	}
	return nil
}

// startSIPp answers every OPTIONS with 200 on the responder's address;
// -deadcall_wait 0 answers a retransmission again, like a stateless UAS.
func (r *lossyRun) startSIPp() error {
	f, err := r.logFile("sipp.log")
	if err != nil {
		return err
	}
	return r.start("sipp", r.lab.nsR, f, "sipp", "-sf", r.files["options-200.xml"],
		"-i", responderIP, "-p", fmt.Sprint(sipPort), "-t", "u1", "-nostdin", "-deadcall_wait", "0",
		"-cp", "8888", "-mp", "6000", "-trace_err", "-error_file", filepath.Join(r.s.Dir, "sipp-errors.log"))
}

// startQualifyd runs the daemon with JSON logs, which feed the tracker.
func (r *lossyRun) startQualifyd() error {
	f, err := r.logFile("qualifyd.log")
	if err != nil {
		return err
	}
	proberOf := map[string]string{proberN1: proberN1, proberN3: proberN3}
	w := &lineWriter{log: f, fn: func(line []byte) {
		if tr, reached, ok := parseQualifyd(line, proberOf); ok {
			r.tr.add(tr, reached)
		}
	}}
	return r.start("qualifyd", r.lab.nsP, w, r.s.Qualifyd, "run", "--config", r.files["qualifyd.conf"],
		"--http", "", "--log-format", "json", "--sip-bind", fmt.Sprintf("%s:%d", proberIP, sipPort+10))
}

// startKamailio runs the dispatcher probing SIPp; its DSEVENT lines feed
// the tracker.
func (r *lossyRun) startKamailio() error {
	f, err := r.logFile("kamailio.log")
	if err != nil {
		return err
	}
	rundir := filepath.Join(r.s.Dir, "kamailio")
	if err := os.MkdirAll(rundir, 0o755); err != nil {
		return fmt.Errorf("kamailio run dir: %w", err)
	}
	w := &lineWriter{log: f, fn: func(line []byte) {
		if tr, ok := parseKamailio(line, proberKam); ok {
			r.tr.add(tr, false)
		}
	}}
	return r.start("kamailio", r.lab.nsP, w, "kamailio", "-f", r.files["prober.cfg"], "-DD", "-E",
		"-Y", rundir, "-P", filepath.Join(rundir, "kamailio.pid"), "-m", "32", "-M", "8",
		"-A", fmt.Sprintf("LISTEN=udp:%s:%d", proberIP, sipPort),
		"-A", fmt.Sprintf("DSLIST=%q", r.files["dispatcher.list"]),
		"-A", fmt.Sprintf("PING_INTERVAL=%d", r.s.Frequency),
		"-A", fmt.Sprintf("FR_TIMER=%d", r.s.Timeout.Milliseconds()),
		"-A", fmt.Sprintf("PROBING_THRESHOLD=%d", r.s.Failures),
		"-A", "INACTIVE_THRESHOLD=1")
}

// predict runs qualifyd simulate at every loss level of the run (and at
// no loss, for the detection times of the dead spell).
func (r *lossyRun) predict(ctx context.Context) (map[int]map[string]prediction, error) {
	preds := map[int]map[string]prediction{}
	for _, p := range r.phases {
		if _, done := preds[p.LossPercent]; done || p.Dead {
			continue
		}
		fmt.Fprintf(r.progress, "%s simulate --packet-loss %g\n", stamp(time.Now()), float64(p.LossPercent)/100)
		by, err := simulate(ctx, r.s.Qualifyd, r.files["simulate.conf"], float64(p.LossPercent)/100, r.s.SimDays)
		if err != nil {
			return nil, err
		}
		preds[p.LossPercent] = by
	}
	return preds, nil
}

// stamp formats a progress timestamp.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// runLossy is `qualifyd-lab lossy`: flags, the run, the report.
func runLossy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s, asJSON, err := parseLossy(args, stderr)
	if err != nil {
		return 2
	}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "qualifyd-lossy-"); err != nil {
			fmt.Fprintln(stderr, "qualifyd-lab lossy:", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "qualifyd-lab lossy: logs in %s\n", s.Dir)
	rep, err := lossy(ctx, s, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-lab lossy:", err)
		return 1
	}
	if err := rep.print(stdout, asJSON); err != nil {
		fmt.Fprintln(stderr, "qualifyd-lab lossy:", err)
		return 1
	}
	return 0
}
