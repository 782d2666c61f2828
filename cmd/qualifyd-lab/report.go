package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// report is what `qualifyd-lab lossy` prints; --json prints it as is.
type report struct {
	Settings reportSettings `json:"settings"`
	Phases   []reportPhase  `json:"phases"`
	Loss     []lossRow      `json:"loss"`
	Dead     []deadRow      `json:"dead"`
	Notes    []string       `json:"notes,omitempty"`
}

// reportSettings are the run's timings, in seconds.
type reportSettings struct {
	FrequencyS   int     `json:"frequency_s"`
	TimeoutS     float64 `json:"timeout_s"`
	Failures     int     `json:"failures"`
	RetryS       float64 `json:"retry_s"`
	SimulateDays float64 `json:"simulate_days"`
}

// reportPhase is one phase with its nftables counts (both directions).
type reportPhase struct {
	Name             string  `json:"name"`
	LossPercent      int     `json:"loss_percent"`
	Dead             bool    `json:"dead"`
	DurationS        float64 `json:"duration_s"`
	Requests         uint64  `json:"requests"`
	RequestsDropped  uint64  `json:"requests_dropped"`
	Responses        uint64  `json:"responses"`
	ResponsesDropped uint64  `json:"responses_dropped"`
}

// lossRow is one prober at one loss level, measured beside simulate's
// prediction for the same time at the same packet loss.
type lossRow struct {
	Prober                string  `json:"prober"`
	LossPercent           int     `json:"loss_percent"`
	DurationS             float64 `json:"duration_s"`
	MeasuredLossPercent   float64 `json:"measured_loss_percent"`
	FalseOutages          int     `json:"false_outages"`
	PredictedFalseOutages float64 `json:"predicted_false_outages"`
	UnroutableS           float64 `json:"unroutable_seconds"`
	PredictedUnroutableS  float64 `json:"predicted_unroutable_seconds"`
}

// deadRow is one prober's detection of the dead spell and recovery after
// it, beside simulate's detection times and the closed-form worst recovery.
type deadRow struct {
	Prober                   string  `json:"prober"`
	Detected                 bool    `json:"detected"`
	AlreadyDown              bool    `json:"already_down"`
	DetectionS               float64 `json:"detection_seconds"`
	PredictedDetectionMeanS  float64 `json:"predicted_detection_mean_seconds"`
	PredictedDetectionWorstS float64 `json:"predicted_detection_worst_seconds"`
	Recovered                bool    `json:"recovered"`
	RecoveryS                float64 `json:"recovery_seconds"`
	RecoveryWorstS           float64 `json:"recovery_worst_seconds"`
}

// buildReport measures every prober against the phases.
func buildReport(s settings, phases []phase, trs []transition, preds map[int]map[string]prediction, notes []string) report {
	rep := report{Settings: reportSettings{FrequencyS: s.Frequency, TimeoutS: s.Timeout.Seconds(),
		Failures: s.Failures, RetryS: s.Retry.Seconds(), SimulateDays: s.SimDays}, Notes: notes}
	dur, total, dropped := map[int]float64{}, map[int]uint64{}, map[int]uint64{}
	var levels []int
	for _, p := range phases {
		rep.Phases = append(rep.Phases, reportPhaseOf(p))
		if p.Dead {
			continue
		}
		if _, seen := dur[p.LossPercent]; !seen {
			levels = append(levels, p.LossPercent)
		}
		dur[p.LossPercent] += p.End.Sub(p.Start).Seconds()
		total[p.LossPercent] += p.Counters.ReqIn + p.Counters.RespOut
		dropped[p.LossPercent] += p.Counters.ReqDropped + p.Counters.RespDropped
	}
	slices.Sort(levels)
	end := phases[len(phases)-1].End
	for _, name := range probers {
		st := measureProber(phases, trs, name, s.Timeout, end)
		for _, l := range levels {
			pr := preds[l][name]
			rep.Loss = append(rep.Loss, lossRow{Prober: name, LossPercent: l, DurationS: dur[l],
				MeasuredLossPercent: percent(dropped[l], total[l]),
				FalseOutages:        st.ByLoss[l].FalseOutages, PredictedFalseOutages: pr.FalseOutagesPerDay * dur[l] / 86400,
				UnroutableS: st.ByLoss[l].UnroutableS, PredictedUnroutableS: pr.UnavailableFraction * dur[l]})
		}
		pr := preds[0][name]
		rep.Dead = append(rep.Dead, deadRow{Prober: name, Detected: st.Detected, AlreadyDown: st.AlreadyDown,
			DetectionS: st.DetectionS, PredictedDetectionMeanS: pr.DetectionMeanS, PredictedDetectionWorstS: pr.DetectionWorstS,
			Recovered: st.Recovered, RecoveryS: st.RecoveryS, RecoveryWorstS: recoveryWorst(s, name).Seconds()})
	}
	slices.SortStableFunc(rep.Loss, func(a, b lossRow) int { return a.LossPercent - b.LossPercent })
	return rep
}

// reportPhaseOf is one phase as reported.
func reportPhaseOf(p phase) reportPhase {
	return reportPhase{Name: p.Name, LossPercent: p.LossPercent, Dead: p.Dead, DurationS: p.End.Sub(p.Start).Seconds(),
		Requests: p.Counters.ReqIn, RequestsDropped: p.Counters.ReqDropped,
		Responses: p.Counters.RespOut, ResponsesDropped: p.Counters.RespDropped}
}

// percent is 100 n / d, or 0.
func percent(n, d uint64) float64 {
	if d == 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

// recoveryWorst is the closed-form longest time from the path coming back
// to the prober seeing it (plus one round trip): the probe in flight then
// may have been lost, so the next one is due at most one down-state probe
// cycle later. Asterisk's policy and Kamailio probe every F while down;
// the N-failure policy every T + D, with D = R.
func recoveryWorst(s settings, prober string) time.Duration {
	if prober == proberN3 {
		return s.Timeout + s.Retry
	}
	return time.Duration(s.Frequency) * time.Second
}

// proberLabel is a prober's name in the text table.
func proberLabel(s reportSettings, name string) string {
	switch name {
	case proberN1:
		return "qualifyd N=1 (Asterisk)"
	case proberN3:
		return fmt.Sprintf("qualifyd N=%d R=%gs", s.Failures, s.RetryS)
	}
	return fmt.Sprintf("Kamailio threshold %d", s.Failures)
}

// print writes the report as text tables, or as one JSON object.
func (rep report) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	s := rep.Settings
	fmt.Fprintf(w, "F %d s, T %g s; qualifyd N=1 and N=%d with R %g s; Kamailio dispatcher ds_ping_interval %d s, fr_timer %g ms, ds_probing_threshold %d, ds_inactive_threshold 1; simulate: %g days, seed 1\n",
		s.FrequencyS, s.TimeoutS, s.Failures, s.RetryS, s.FrequencyS, s.TimeoutS*1000, s.Failures, s.SimulateDays)
	rep.printPhases(w)
	rep.printLoss(w)
	rep.printDead(w)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

// printPhases writes each phase's length and nftables counts.
func (rep report) printPhases(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PHASE\tSECONDS\tREQUESTS\tDROPPED\tRESPONSES\tDROPPED\t")
	for _, p := range rep.Phases {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%d\t\n", p.Name, p.DurationS, p.Requests, p.RequestsDropped, p.Responses, p.ResponsesDropped)
	}
	tw.Flush()
}

// printLoss writes false outages and unroutable time by loss level.
func (rep report) printLoss(w io.Writer) {
	fmt.Fprintln(w, "\nwhile the peer was alive (simulate's prediction for the same time in parentheses):")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "LOSS\tMEASURED\tSECONDS\tPROBER\tFALSE OUTAGES\tUNROUTABLE S\t")
	for _, r := range rep.Loss {
		fmt.Fprintf(tw, "%d%%\t%.1f%%\t%.0f\t%s\t%d (%.2f)\t%.1f (%.1f)\t\n", r.LossPercent, r.MeasuredLossPercent, r.DurationS,
			proberLabel(rep.Settings, r.Prober), r.FalseOutages, r.PredictedFalseOutages, r.UnroutableS, r.PredictedUnroutableS)
	}
	tw.Flush()
}

// printDead writes detection and recovery of the dead spell.
func (rep report) printDead(w io.Writer) {
	fmt.Fprintln(w, "\ndead spell (detection: simulate's mean / worst; recovery: closed-form worst):")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PROBER\tDETECTED AFTER S\tPREDICTED S\tRECOVERED AFTER S\tWORST S\t")
	for _, r := range rep.Dead {
		fmt.Fprintf(tw, "%s\t%s\t%.1f / %.1f\t%s\t%.1f\t\n", proberLabel(rep.Settings, r.Prober),
			seconds(r.Detected, r.DetectionS, r.AlreadyDown), r.PredictedDetectionMeanS, r.PredictedDetectionWorstS,
			seconds(r.Recovered, r.RecoveryS, false), r.RecoveryWorstS)
	}
	tw.Flush()
}

// seconds formats a measured time, or why there is none.
func seconds(ok bool, v float64, alreadyDown bool) string {
	switch {
	case alreadyDown:
		return "already down"
	case !ok:
		return "never"
	}
	return fmt.Sprintf("%.2f", v)
}
