package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/qualifyd/qualifyd/internal/simulate"
)

// callsResult is what the calls change for one AoR (qualify-semantics
// §11): its detection with the calls reported as observations, against
// the probes alone, and its healthy probe rate with qualify_quiet_only,
// against without.
type callsResult struct {
	Name                     string  `json:"name"`
	CallInterval             float64 `json:"call_interval"`
	CallTimeout              float64 `json:"call_timeout"`
	DetectionWorstSeconds    float64 `json:"detection_worst_seconds"`
	DetectionMeanSeconds     float64 `json:"detection_mean_seconds"`
	ProbesPerHourHealthy     float64 `json:"probes_per_hour_healthy"`
	QuietOnlyProbesPerHour   float64 `json:"quiet_only_probes_per_hour_healthy"`
	QuietOnlyDetectionWorst  float64 `json:"quiet_only_detection_worst_seconds"`
	QuietOnlyFalseOutagesDay float64 `json:"quiet_only_false_outages_per_day"`
}

// simulateCalls runs every AoR again with the calls of o, as configured
// and with qualify_quiet_only=yes; base holds the runs without calls.
func simulateCalls(ctx context.Context, o simulateOptions, aors []simulate.AoR, base []simulate.Result) ([]callsResult, error) {
	cfg := o.config(o.loss)
	cfg.Calls = simulate.Calls{Interval: seconds(o.callInterval), Timeout: seconds(o.callTimeout)}
	quiet := make([]simulate.AoR, len(aors))
	for i, a := range aors {
		quiet[i] = a
		quiet[i].Policy.QuietOnly = true
	}
	with, err := simulate.Run(ctx, aors, cfg)
	if err != nil {
		return nil, err
	}
	q, err := simulate.Run(ctx, quiet, cfg)
	if err != nil {
		return nil, err
	}
	out := make([]callsResult, len(aors))
	for i := range aors {
		out[i] = callsResult{Name: aors[i].Name, CallInterval: o.callInterval, CallTimeout: o.callTimeout,
			DetectionWorstSeconds: with[i].DetectionWorstSeconds, DetectionMeanSeconds: with[i].DetectionMeanSeconds,
			ProbesPerHourHealthy: base[i].ProbesPerHourHealthy, QuietOnlyProbesPerHour: q[i].ProbesPerHourHealthy,
			QuietOnlyDetectionWorst: q[i].DetectionWorstSeconds, QuietOnlyFalseOutagesDay: q[i].FalseOutagesPerDay}
	}
	return out, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// writeCalls prints what the calls change, one row per AoR, beside the
// figures without them (base).
func writeCalls(w io.Writer, o simulateOptions, cs []callsResult) error {
	fmt.Fprintf(w, "with a call every %gs, seen failing %gs after it began on a dead trunk (--call-timeout), reported as observations:\n",
		o.callInterval, o.callTimeout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "AOR\tDETECT WORST S\tDETECT MEAN S\tQUIET_ONLY: PROBES/H HEALTHY\tSAVED\tFALSE OUTAGES/DAY\tDETECT WORST S\t")
	for _, c := range cs {
		saved := 0.0
		if c.ProbesPerHourHealthy > 0 {
			saved = 100 * (1 - c.QuietOnlyProbesPerHour/c.ProbesPerHourHealthy)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.0f%%\t%.3g\t%.1f\t\n", c.Name, c.DetectionWorstSeconds, c.DetectionMeanSeconds,
			c.QuietOnlyProbesPerHour, saved, c.QuietOnlyFalseOutagesDay, c.QuietOnlyDetectionWorst)
	}
	return tw.Flush()
}
