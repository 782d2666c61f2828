package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// runBlipLab is `qualifyd-lab blip`: it prints the table and exits 1 when
// any object up before a blip was pushed down, or a dead one up.
func runBlipLab(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s := soakBlip()
	fs := flag.NewFlagSet("blip", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&s.AoRs, "aors", s.AoRs, "AoRs, each its own destination")
	fs.IntVar(&s.Dead, "dead", s.Dead, "of them, really dead (never answer)")
	fs.IntVar(&s.Frequency, "frequency", s.Frequency, "qualify_frequency, whole seconds")
	fs.DurationVar(&s.Timeout, "timeout", s.Timeout, "qualify_timeout")
	fs.IntVar(&s.Failures, "failures", s.Failures, "qualify_failures")
	fs.DurationVar(&s.Retry, "retry", s.Retry, "qualify_retry_interval")
	blips := fs.String("blips", "15s,60s", "blips of qualifyd's link to the peers, one after the other, comma separated")
	fs.DurationVar(&s.Watch, "watch", s.Watch, "time watched after each blip's end")
	fs.StringVar(&s.Qualifyd, "qualifyd", "bin/qualifyd", "the qualifyd binary (make build)")
	fs.StringVar(&s.KamCfg, "kamailio-cfg", "cmd/qualifyd/testdata/kamailio/kamailio.cfg", "the kamailio.cfg of docs/routers.md")
	fs.StringVar(&s.Dir, "dir", "", "directory for logs and generated files (default: a new temporary one)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s.Blips = nil
	for _, b := range strings.Split(*blips, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(b))
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "qualifyd-lab blip: -blips %q: want positive durations\n", *blips)
			return 2
		}
		s.Blips = append(s.Blips, d)
	}
	if s.Dir == "" {
		dir, err := os.MkdirTemp("", "qualifyd-blip-")
		if err != nil {
			fmt.Fprintln(stderr, "qualifyd-lab blip:", err)
			return 1
		}
		s.Dir = dir
	}
	rows, err := blip(ctx, s, stderr)
	printBlip(stdout, s, rows)
	fmt.Fprintf(stdout, "logs in %s\n", s.Dir)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-lab blip:", err)
		return 1
	}
	for _, r := range rows {
		if r.falseDowns() != 0 {
			return 1
		}
	}
	return 0
}
