package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/responder"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// The dropflow run's two helpers, which it starts inside its namespaces
// as `qualifyd-lab dropflow-peer` and `dropflow-prober` (the test binary
// dispatches them in TestMain).

// runDropPeer answers OPTIONS over TCP on -listen until stopped.
func runDropPeer(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("dropflow-peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "TCP address to answer on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s, err := responder.ListenStream(*listen)
	if err != nil {
		fmt.Fprintln(stderr, "dropflow-peer:", err)
		return 1
	}
	<-ctx.Done()
	_ = s.Close()
	return 0
}

// runDropProbers measures the rules before the redial and now side by
// side, each its own Prober, and prints a JSON dropRow for each.
func runDropProbers(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s := shortDrop()
	fs := flag.NewFlagSet("dropflow-prober", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dropFlags(fs, &s)
	target := fs.String("target", "", "the peer's TCP address")
	bind := fs.String("bind", "", "the probers' local address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rows, errs := make([]dropRow, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i, legacy := range []bool{true, false} {
		wg.Go(func() { rows[i], errs[i] = measureDrop(ctx, s, *target, *bind, legacy) })
	}
	wg.Wait()
	for i, r := range rows {
		if errs[i] != nil {
			fmt.Fprintf(stderr, "dropflow-prober %s: %v\n", r.Mode, errs[i])
			return 1
		}
		b, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return 0
}

// measureDrop probes target in cycles F apart, each until an answer,
// R after each failure, and counts the failures of every cycle but the
// first (which dials the first connection).
func measureDrop(ctx context.Context, s dropSettings, target, bind string, legacy bool) (dropRow, error) {
	row := dropRow{Mode: "redial", Cycles: s.Cycles}
	if legacy {
		row.Mode = "before"
	}
	p, err := sipprobe.New(sipprobe.Config{ListenAddr: bind, LegacyStreams: legacy})
	if err != nil {
		return row, err
	}
	defer p.Close()
	tg := probe.Target{AoR: "dropflow", URI: "sip:lab@" + target + ";transport=tcp", Timeout: s.Timeout}
	start := time.Now()
	for c := 0; c <= s.Cycles; c++ {
		failures, err := dropCycle(ctx, p, tg, s.Retry)
		if err != nil {
			return row, fmt.Errorf("cycle %d: %w", c, err)
		}
		if c > 0 {
			row.Failures = append(row.Failures, failures)
		}
		if !sleepCtx(ctx, time.Until(start.Add(time.Duration(c+1)*s.Frequency))) {
			return row, ctx.Err()
		}
	}
	row.Redials = p.Stats().Redials
	return row, nil
}

// maxCycleFailures ends a cycle that never gets an answer.
const maxCycleFailures = 5

// dropCycle probes until an answer, retry after each failure, and
// returns the failures.
func dropCycle(ctx context.Context, p *sipprobe.Prober, tg probe.Target, retry time.Duration) (int, error) {
	for failures := 0; ; failures++ {
		res := p.Probe(ctx, tg)
		if res.Code == 200 {
			return failures, nil
		}
		if failures+1 >= maxCycleFailures {
			return failures + 1, fmt.Errorf("no answer in %d probes: %s %s", maxCycleFailures, res.Reason, res.Detail)
		}
		if !sleepCtx(ctx, retry) {
			return failures, ctx.Err()
		}
	}
}
