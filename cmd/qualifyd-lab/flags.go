package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parseLossy reads the flags of `qualifyd-lab lossy` over fullSettings.
func parseLossy(args []string, stderr io.Writer) (settings, bool, error) {
	s := fullSettings()
	fs := flag.NewFlagSet("lossy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&s.Frequency, "frequency", s.Frequency, "qualify_frequency and ds_ping_interval, whole seconds")
	fs.DurationVar(&s.Timeout, "timeout", s.Timeout, "qualify_timeout and Kamailio's fr_timer")
	fs.IntVar(&s.Failures, "failures", s.Failures, "qualify_failures of the second AoR and ds_probing_threshold")
	fs.DurationVar(&s.Retry, "retry", s.Retry, "qualify_retry_interval of the second AoR")
	losses := fs.String("loss", "5,20", "loss levels in percent (each direction), one phase each, comma separated")
	fs.DurationVar(&s.LossDuration, "loss-duration", s.LossDuration, "length of each loss phase")
	fs.DurationVar(&s.Dead, "dead", s.Dead, "length of the dead spell")
	fs.DurationVar(&s.Recover, "recover", s.Recover, "most time allowed to recover")
	fs.Float64Var(&s.SimDays, "simulate-days", s.SimDays, "simulated days of each qualifyd simulate prediction")
	fs.StringVar(&s.Qualifyd, "qualifyd", "bin/qualifyd", "the qualifyd binary (make build)")
	fs.StringVar(&s.Dir, "dir", "", "directory for logs and generated files (default: a new temporary one)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return s, false, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "qualifyd-lab lossy: unexpected arguments %q\n", fs.Args())
		return s, false, flag.ErrHelp
	}
	var err error
	if s.Losses, err = parseLosses(*losses); err != nil {
		fmt.Fprintln(stderr, "qualifyd-lab lossy:", err)
	}
	return s, *asJSON, err
}

// parseLosses reads "5,20".
func parseLosses(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--loss %q: %w", v, err)
		}
		out = append(out, n)
	}
	return out, nil
}
