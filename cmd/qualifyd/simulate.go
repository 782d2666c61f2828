package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/simulate"
)

const simulateUsage = `usage: qualifyd simulate [--probe-loss P | --packet-loss P] [--burst MEAN_S] [--call-interval C_S [--call-timeout X_S]] [--days N] [--trials N] [--seed S] [--json] FILE
       qualifyd simulate --recommend --probe-loss P --detect-within S [--burst MEAN_S] [--max-probes-per-hour X] [--days N] [--trials N] [--seed S] [FILE]`

// simulateOptions are the flags of "qualifyd simulate".
type simulateOptions struct {
	loss         simulate.Loss
	burst        float64 // seconds
	days         float64
	trials       int
	seed         uint64
	json         bool
	recommend    bool
	detectWithin float64 // seconds
	maxProbes    float64
	callInterval float64 // seconds; 0: no calls
	callTimeout  float64 // seconds
	file         string
}

// errSimulateUsage marks a usage error (exit 2); its message is printed.
var errSimulateUsage = errors.New("usage")

// runSimulate is "qualifyd simulate": it runs the real engine in virtual
// time for every AoR of FILE against a lossy, then dying, simulated peer
// and prints what it measured, or with --recommend searches for
// settings that meet a detection bound with the fewest false outages. It
// exits 0, 1 on bad input, or 2 on a usage error.
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseSimulate(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errSimulateUsage):
		fmt.Fprintf(stderr, "qualifyd simulate: %v\n%s\n", err, simulateUsage)
		return 2
	case err != nil:
		return 2 // the flag package printed it
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "qualifyd simulate: %v\n", err)
		return 1
	}
	if o.recommend {
		err = recommend(ctx, o, stdout, stderr)
	} else {
		err = simulateFile(ctx, o, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd simulate: %v\n", err)
		return 1
	}
	return 0
}

// parseSimulate reads the flags and checks their combination.
func parseSimulate(args []string, stderr io.Writer) (simulateOptions, error) {
	var o simulateOptions
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&o.loss.Probe, "probe-loss", 0, "probability that a probe fails, independently")
	fs.Float64Var(&o.loss.Packet, "packet-loss", 0, "probability that a packet is lost in each direction (UDP retransmissions modelled)")
	fs.Float64Var(&o.burst, "burst", 0, "mean loss burst in seconds: a Gilbert-Elliott channel instead of independent losses")
	fs.Float64Var(&o.days, "days", simulate.DefaultDays, "simulated days of the healthy run")
	fs.IntVar(&o.trials, "trials", simulate.DefaultTrials, "deaths of the peer per AoR, for the detection times")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed; equal seeds give equal results")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.BoolVar(&o.recommend, "recommend", false, "search qualify_failures, retry and down interval for the given bounds")
	fs.Float64Var(&o.detectWithin, "detect-within", 0, "with --recommend: worst detection time in seconds")
	fs.Float64Var(&o.maxProbes, "max-probes-per-hour", 0, "with --recommend: probe rate bound, healthy and dead (0: none)")
	fs.Float64Var(&o.callInterval, "call-interval", 0, "a call to the trunk every this many seconds, reported as observations: how much they shorten detection and what qualify_quiet_only saves (0: none)")
	fs.Float64Var(&o.callTimeout, "call-timeout", 32, "with --call-interval: seconds until the router sees a call to a dead trunk fail (Timer B, fr_timer)")
	fs.Usage = func() { fmt.Fprintln(stderr, simulateUsage); fs.PrintDefaults() }
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return o, err
	}
	return o, o.combine(fs, pos)
}

// combine checks which flags go together and takes the file argument.
func (o *simulateOptions) combine(fs *flag.FlagSet, pos []string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case len(pos) > 1:
		return fmt.Errorf("%w: one FILE, got %d arguments", errSimulateUsage, len(pos))
	case len(pos) == 0 && !o.recommend:
		return fmt.Errorf("%w: FILE is required", errSimulateUsage)
	case set["probe-loss"] && set["packet-loss"]:
		return fmt.Errorf("%w: --probe-loss and --packet-loss are exclusive", errSimulateUsage)
	case o.recommend && (!set["probe-loss"] || !set["detect-within"]):
		return fmt.Errorf("%w: --recommend needs --probe-loss and --detect-within", errSimulateUsage)
	case o.recommend && (set["packet-loss"] || set["json"]):
		return fmt.Errorf("%w: --recommend takes neither --packet-loss nor --json", errSimulateUsage)
	case !o.recommend && (set["detect-within"] || set["max-probes-per-hour"]):
		return fmt.Errorf("%w: --detect-within and --max-probes-per-hour need --recommend", errSimulateUsage)
	case o.recommend && set["call-interval"]:
		return fmt.Errorf("%w: --recommend takes no --call-interval", errSimulateUsage)
	case set["call-timeout"] && !set["call-interval"]:
		return fmt.Errorf("%w: --call-timeout needs --call-interval", errSimulateUsage)
	}
	if len(pos) == 1 {
		o.file = pos[0]
	}
	return nil
}

// validate checks the values: probabilities in [0, 1], positive times.
func (o *simulateOptions) validate() error {
	if !(o.burst >= 0 && o.burst <= qualify.MaxInterval.Seconds()) {
		return fmt.Errorf("--burst %v: want 0 to %v seconds", o.burst, qualify.MaxInterval.Seconds())
	}
	o.loss.Burst = time.Duration(o.burst * float64(time.Second))
	if err := o.loss.Validate(); err != nil {
		return err
	}
	if !(o.days > 0 && o.days <= 1e6) {
		return fmt.Errorf("--days %v: want more than 0 and at most a million", o.days)
	}
	if o.trials < 1 || o.trials > 1e7 {
		return fmt.Errorf("--trials %d: want 1 to 10000000", o.trials)
	}
	if o.recommend && !(o.detectWithin > 0 && o.detectWithin <= qualify.MaxInterval.Seconds()) {
		return fmt.Errorf("--detect-within %v: want a positive number of seconds", o.detectWithin)
	}
	if o.recommend && o.loss.Probe >= 1 {
		return fmt.Errorf("--probe-loss %v: --recommend needs a loss below 1", o.loss.Probe)
	}
	if !(o.maxProbes >= 0 && !math.IsInf(o.maxProbes, 1)) {
		return fmt.Errorf("--max-probes-per-hour %v: want 0 or more", o.maxProbes)
	}
	if !(o.callInterval == 0 || o.callInterval >= 0.1 && o.callInterval <= qualify.MaxInterval.Seconds()) {
		return fmt.Errorf("--call-interval %v: want 0 or 0.1 to %v seconds", o.callInterval, qualify.MaxInterval.Seconds())
	}
	if !(o.callTimeout >= 0 && o.callTimeout <= qualify.MaxInterval.Seconds()) {
		return fmt.Errorf("--call-timeout %v: want 0 to %v seconds", o.callTimeout, qualify.MaxInterval.Seconds())
	}
	return nil
}

// config returns the simulation's configuration with loss.
func (o *simulateOptions) config(loss simulate.Loss) simulate.Config {
	return simulate.Config{Loss: loss, Days: o.days, Trials: o.trials, Seed: o.seed}
}

// loadAoRs reads FILE and returns its qualified AoRs, noting the others.
func loadAoRs(file string, stderr io.Writer) ([]simulate.AoR, error) {
	cfg, err := pjsip.Load(file, pjsip.Options{})
	if err != nil {
		return nil, err
	}
	var out []simulate.AoR
	for _, a := range cfg.AoRs {
		p := a.PolicyValue()
		if !p.Enabled() {
			fmt.Fprintf(stderr, "qualifyd simulate: AoR %q: qualify is off, skipped\n", a.Name)
			continue
		}
		out = append(out, simulate.AoR{Name: a.Name, Policy: p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no AoR with qualify_frequency > 0", file)
	}
	return out, nil
}

// simulateFile simulates every qualified AoR of the file and prints the
// results.
func simulateFile(ctx context.Context, o simulateOptions, stdout, stderr io.Writer) error {
	aors, err := loadAoRs(o.file, stderr)
	if err != nil {
		return err
	}
	rs, err := simulate.Run(ctx, aors, o.config(o.loss))
	if err != nil {
		return err
	}
	var calls []callsResult
	if o.callInterval > 0 {
		if calls, err = simulateCalls(ctx, o, aors, rs); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			AoRs  []simulate.Result `json:"aors"`
			Calls []callsResult     `json:"calls,omitempty"`
		}{rs, calls})
	}
	fmt.Fprintf(stdout, "%s; %g days healthy, %d deaths per AoR; seed %d\n", describeLoss(o.loss), o.days, o.trials, o.seed)
	if err := writeResults(stdout, rs); err != nil || calls == nil {
		return err
	}
	return writeCalls(stdout, o, calls)
}

// describeLoss says what the peer's path loses, in words.
func describeLoss(l simulate.Loss) string {
	s := "no loss"
	switch {
	case l.Packet > 0:
		s = fmt.Sprintf("packet loss %g%% each way, UDP retransmissions", 100*l.Packet)
	case l.Probe > 0:
		s = fmt.Sprintf("probe loss %g%%", 100*l.Probe)
	}
	if l.Burst > 0 {
		s += fmt.Sprintf(" in bursts of %gs on average", l.Burst.Seconds())
	}
	return s
}

// resultHeader heads the text table of results.
const resultHeader = "AOR\tPROBES/H HEALTHY\tPROBES/H DEAD\tUDP/MIN DEAD\tFALSE OUTAGES/DAY\tMEAN OUTAGE S\tUNAVAILABLE\tDETECT WORST S\tDETECT MEAN S\t"

// writeResults prints one aligned row per AoR.
func writeResults(w io.Writer, rs []simulate.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, resultHeader)
	for _, r := range rs {
		fmt.Fprintln(tw, resultRow(r.Name, r))
	}
	return tw.Flush()
}

// resultRow formats one result as a tab-separated row.
func resultRow(name string, r simulate.Result) string {
	return fmt.Sprintf("%s\t%.1f\t%.1f\t%.1f\t%.3g\t%.1f\t%.3g%%\t%.1f\t%.1f\t", name,
		r.ProbesPerHourHealthy, r.ProbesPerHourDead, r.DatagramsPerMinuteDead, r.FalseOutagesPerDay, r.MeanFalseOutageSeconds,
		100*r.UnavailableFraction, r.DetectionWorstSeconds, r.DetectionMeanSeconds)
}

// recommend prints, for each qualified AoR of FILE (or Asterisk's usual
// F = 60 s, T = 3 s without one), the recommended settings, the trade-off
// table and the winner confirmed by simulation.
func recommend(ctx context.Context, o simulateOptions, stdout, stderr io.Writer) error {
	aors := []simulate.AoR{{Name: "default", Policy: qualify.Policy{Frequency: 60 * time.Second, Timeout: 3 * time.Second}}}
	if o.file != "" {
		var err error
		if aors, err = loadAoRs(o.file, stderr); err != nil {
			return err
		}
	}
	b := simulate.Bounds{Loss: o.loss.Probe, DetectWithin: time.Duration(o.detectWithin * float64(time.Second)), MaxProbesPerHour: o.maxProbes}
	for i, a := range aors {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := recommendOne(ctx, a, b, o, stdout); err != nil {
			return fmt.Errorf("AoR %q: %w", a.Name, err)
		}
	}
	return nil
}

// recommendOne searches, confirms and prints one AoR's recommendation.
func recommendOne(ctx context.Context, a simulate.AoR, b simulate.Bounds, o simulateOptions, w io.Writer) error {
	cs, err := simulate.Recommend(a.Policy, b)
	if err != nil {
		return err
	}
	win := simulate.AoR{Name: a.Name, Policy: cs[0].Policy}
	rs, err := simulate.Run(ctx, []simulate.AoR{win}, o.config(simulate.Loss{Probe: b.Loss}))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: probe loss %g%%, detection within %gs", a.Name, 100*b.Loss, b.DetectWithin.Seconds())
	if b.MaxProbesPerHour > 0 {
		fmt.Fprintf(w, ", at most %g probes an hour", b.MaxProbesPerHour)
	}
	fmt.Fprintf(w, "\nrecommended: %s\n\n", settings(cs[0].Policy))
	if err := writeTradeOff(w, cs, rs[0], o); err != nil {
		return err
	}
	alt, ok := simulate.ProposeAuto(cs[0].Policy, b)
	if ok {
		fmt.Fprintf(w, "\nor, to fit the link's loss as it changes: %s\n", settings(alt.Policy))
		fmt.Fprintf(w, "  at %g%% loss it holds N = %d: %.3g false outages a day, detection %.1fs worst;\n", 100*b.Loss, alt.N,
			alt.Expected.FalseOutagesPerDay, alt.Expected.DetectionWorstSeconds)
		fmt.Fprintf(w, "  on a clean link (%g%%) N = %d: %.3g false outages a day, detection %.1fs worst\n", 100*simulate.CleanLoss, alt.CleanN,
			alt.Clean.FalseOutagesPerDay, alt.Clean.DetectionWorstSeconds)
	}
	if o.loss.Burst > 0 {
		return proposeWindow(ctx, w, cs[0].Policy, alt, ok, b, o)
	}
	return nil
}

// proposeWindow simulates the recommended settings, and auto's if
// proposed, under the bursts of o with and without the failure window
// simulate.WindowFor proposes, and proposes the window where it cuts the
// false outages.
func proposeWindow(ctx context.Context, w io.Writer, win qualify.Policy, alt simulate.Alternative, auto bool, b simulate.Bounds, o simulateOptions) error {
	aors := []simulate.AoR{{Name: "recommended", Policy: win}}
	if auto {
		aors = append(aors, simulate.AoR{Name: "auto", Policy: alt.Policy})
	}
	for _, a := range aors[:len(aors):len(aors)] {
		n := a.Policy.FailureThreshold()
		if a.Policy.FailuresAuto {
			n = alt.CleanN
		}
		if wd := simulate.WindowFor(a.Policy, n, o.loss.Burst, b.DetectWithin); wd > 0 {
			a.Policy.FailureWindow = wd
			aors = append(aors, simulate.AoR{Name: a.Name + "+window", Policy: a.Policy})
		}
	}
	rs, err := simulate.Run(ctx, aors, o.config(simulate.Loss{Probe: b.Loss, Burst: o.loss.Burst}))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nunder %s, simulated:\n", describeLoss(simulate.Loss{Probe: b.Loss, Burst: o.loss.Burst}))
	if err := writeResults(w, rs); err != nil {
		return err
	}
	return writeWindowVerdict(w, aors, rs)
}

// writeWindowVerdict proposes each window that cut its setting's
// simulated false outages, or says that none is worth it.
func writeWindowVerdict(w io.Writer, aors []simulate.AoR, rs []simulate.Result) error {
	proposed := false
	for i := range aors {
		for j := range i {
			if aors[i].Name == aors[j].Name+"+window" && rs[i].FalseOutagesPerDay < rs[j].FalseOutagesPerDay {
				fmt.Fprintf(w, "add qualify_failure_window=%g to %s: %.3g instead of %.3g false outages a day\n",
					aors[i].Policy.FailureWindow.Seconds(), aors[j].Name, rs[i].FalseOutagesPerDay, rs[j].FalseOutagesPerDay)
				proposed = true
			}
		}
	}
	if !proposed {
		_, err := fmt.Fprintln(w, "no failure window fits the detection bound and cuts the false outages")
		return err
	}
	return nil
}

// settings spells a policy's qualify options as pjsip.conf lines would.
func settings(p qualify.Policy) string {
	s := []string{fmt.Sprintf("qualify_frequency=%g", p.Frequency.Seconds()), fmt.Sprintf("qualify_timeout=%g", p.ProbeTimeout().Seconds())}
	if p.FailuresAuto {
		s = append(s, fmt.Sprintf("qualify_failures=auto qualify_failures_max=%d", p.Effective().FailuresMax))
	} else {
		s = append(s, fmt.Sprintf("qualify_failures=%d", p.FailureThreshold()))
	}
	optional := []struct {
		name string
		d    time.Duration
	}{{"qualify_retry_interval", p.RetryInterval}, {"qualify_down_interval", p.DownInterval}, {"qualify_failure_window", p.FailureWindow}}
	for _, o := range optional {
		if o.d > 0 {
			s = append(s, fmt.Sprintf("%s=%g", o.name, o.d.Seconds()))
		}
	}
	if p.SuccessThreshold() > 1 {
		s = append(s, fmt.Sprintf("qualify_successes=%d", p.SuccessThreshold()))
	}
	return strings.Join(s, " ")
}

// writeTradeOff prints the best setting for each qualify_failures from the
// closed forms, the winner marked, and the winner's simulation.
func writeTradeOff(w io.Writer, cs []simulate.Candidate, sim simulate.Result, o simulateOptions) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tFAILURES\tFREQUENCY\tRETRY\tDOWN\tPROBES/H HEALTHY\tPROBES/H DEAD\tUDP/MIN DEAD\tFALSE OUTAGES/DAY\tMEAN OUTAGE S\tUNAVAILABLE\tDETECT WORST S\tDETECT MEAN S\t")
	for i, c := range cs {
		mark := "closed form"
		if i == 0 {
			mark = "* closed form"
		}
		fmt.Fprintln(tw, mark+"\t"+policyCells(c.Policy)+"\t"+expectedCells(c.Expected))
	}
	fmt.Fprintf(tw, "* simulated\t%s\t%s\n", policyCells(cs[0].Policy), strings.SplitN(resultRow("", sim), "\t", 2)[1])
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "(* recommended; simulated over %g days and %d deaths, seed %d; closed-form detection mean assumes no loss before the death)\n",
		o.days, o.trials, o.seed)
	return err
}

// policyCells formats N, F, R and D ("-" when unset) as table cells.
func policyCells(p qualify.Policy) string {
	unset := func(d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return fmt.Sprintf("%gs", d.Seconds())
	}
	down := unset(p.DownInterval)
	if p.BacksOff() {
		down = fmt.Sprintf("%gs..%gs", p.RetryInterval.Seconds(), p.EffectiveDownInterval().Seconds())
	}
	return fmt.Sprintf("%d\t%gs\t%s\t%s", p.FailureThreshold(), p.Frequency.Seconds(), unset(p.RetryInterval), down)
}

// expectedCells formats closed forms in writeResults' columns.
func expectedCells(x simulate.Expected) string {
	return fmt.Sprintf("%.1f\t%.1f\t%.1f\t%.3g\t%.1f\t%.3g%%\t%.1f\t%.1f\t", x.ProbesPerHourHealthy, x.ProbesPerHourDown,
		x.DatagramsPerMinuteDown, x.FalseOutagesPerDay, x.MeanFalseOutageSeconds, 100*x.UnavailableFraction, x.DetectionWorstSeconds, x.DetectionMeanSeconds)
}
