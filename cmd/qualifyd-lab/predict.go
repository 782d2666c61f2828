package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// prediction is what `qualifyd simulate --packet-loss P --json` says about
// one AoR (the fields this experiment compares).
type prediction struct {
	Name                string  `json:"name"`
	FalseOutagesPerDay  float64 `json:"false_outages_per_day"`
	MeanFalseOutageS    float64 `json:"mean_false_outage_seconds"`
	UnavailableFraction float64 `json:"unavailable_fraction"`
	DetectionWorstS     float64 `json:"detection_worst_seconds"`
	DetectionMeanS      float64 `json:"detection_mean_seconds"`
}

// simTimeout bounds one run of qualifyd simulate.
const simTimeout = 2 * time.Minute

// simulate runs the qualifyd binary's simulate subcommand on conf at one
// packet loss (a fraction) and returns its predictions by AoR name.
func simulate(ctx context.Context, qualifyd, conf string, loss, days float64) (map[string]prediction, error) {
	ctx, cancel := context.WithTimeout(ctx, simTimeout)
	defer cancel()
	args := []string{"simulate", "--packet-loss", strconv.FormatFloat(loss, 'g', -1, 64),
		"--days", strconv.FormatFloat(days, 'g', -1, 64), "--seed", "1", "--json", conf}
	cmd := exec.CommandContext(ctx, qualifyd, args...)
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w%s", qualifyd, args, err, stderrOf(err))
	}
	var doc struct {
		AoRs []prediction `json:"aors"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("qualifyd simulate --json output: %w", err)
	}
	by := map[string]prediction{}
	for _, p := range doc.AoRs {
		by[p.Name] = p
	}
	return by, nil
}

// stderrOf returns ": " and the standard error of a failed command, if any.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return ": " + string(ee.Stderr)
	}
	return ""
}
