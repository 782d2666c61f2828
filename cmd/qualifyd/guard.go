package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/daemon"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// guardOptions are the flags and arguments of `qualifyd guard`.
type guardOptions struct {
	config, configDir, logFormat string
	interval                     time.Duration
	sinks                        []string
}

// defaultGuardInterval is how often the guard reads the heartbeat.
const defaultGuardInterval = 2 * time.Second

// guardLogBound is how long the log's writer is given at exit to write
// the lines logged before it, as the daemon's.
const guardLogBound = 2 * time.Second

func parseGuard(args []string, stderr io.Writer) (guardOptions, error) {
	var o guardOptions
	fs := flag.NewFlagSet("guard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, "guard --config FILE [flags] [SINK...]")
	fs.StringVar(&o.config, "config", "", "qualifyd's configuration file: its method=maintenance sinks are guarded (all, or the SINKs named)")
	fs.StringVar(&o.configDir, "config-dir", "", "directory relative #include paths resolve against (default: the config file's directory)")
	fs.DurationVar(&o.interval, "interval", defaultGuardInterval, "how often to read each sink's heartbeat (more than 0)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return o, err
	}
	o.sinks = pos
	switch {
	case o.config == "":
		return o, errors.New("--config FILE is required")
	case o.interval <= 0:
		return o, fmt.Errorf("--interval %v: want more than 0", o.interval)
	case o.logFormat != "text" && o.logFormat != "json":
		return o, fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	return o, nil
}

// runGuard is "qualifyd guard --config FILE [SINK...]": beside Asterisk,
// it takes the endpoints of each method=maintenance sink out of
// maintenance whenever the sink's heartbeat is stale (sink.Guard), until
// interrupted. It exits 1 when the file cannot be read or names no such
// sink, 2 on a usage error.
func runGuard(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseGuard(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "qualifyd guard: %v\n", err)
		}
		return usageExit(err)
	}
	load := func() (*pjsip.Config, error) { return pjsip.Load(o.config, pjsip.Options{ConfigDir: o.configDir}) }
	cfg, err := load()
	if err != nil {
		for _, e := range pjsip.Errors(err) {
			fmt.Fprintf(stderr, "qualifyd guard: %v\n", e)
		}
		return 1
	}
	defs, err := guarded(cfg, o.sinks)
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd guard: %s: %v\n", o.config, err)
		return 1
	}
	log, _ := daemon.NewLog(stdout, o.logFormat, nil)
	defer log.Close(guardLogBound)
	var wg sync.WaitGroup
	for _, def := range defs {
		g := &sink.Guard{Name: def.Name, AMI: sink.NewAMI(def, nil), Endpoints: endpointsOf(load, def.Name),
			Interval: o.interval, Notice: log.Notice}
		log.Notice(slog.LevelInfo, "guard: sink "+def.Name+": guarding "+def.Address+" every "+o.interval.String())
		wg.Go(func() { g.Run(ctx) })
	}
	wg.Wait()
	return 0
}

// guarded returns the sinks to guard: those named, each of which must be
// an ami sink with method=maintenance, or every such sink.
func guarded(cfg *pjsip.Config, names []string) ([]*pjsip.Sink, error) {
	var out []*pjsip.Sink
	for _, def := range cfg.Sinks {
		isMaint := def.Driver == "ami" && def.Method == "maintenance"
		named := slices.Contains(names, def.Name)
		if named && !isMaint {
			return nil, fmt.Errorf("sink %s is not driver=ami method=maintenance: only maintenance needs a guard (devstate fails open in the dial plan)", def.Name)
		}
		if named || len(names) == 0 && isMaint {
			out = append(out, def)
		}
	}
	if len(names) > len(out) {
		return nil, fmt.Errorf("no sink named %s", strings.Join(missing(names, out), ", "))
	}
	if len(out) == 0 {
		return nil, errors.New("no driver=ami method=maintenance sink: nothing to guard")
	}
	return out, nil
}

// missing returns the names no sink of defs has.
func missing(names []string, defs []*pjsip.Sink) []string {
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(defs, func(d *pjsip.Sink) bool { return d.Name == n }) {
			out = append(out, n)
		}
	}
	return out
}

// endpointsOf reads the configuration again and returns the endpoints of
// sink name in it.
func endpointsOf(load func() (*pjsip.Config, error), name string) func() (map[string]bool, error) {
	return func() (map[string]bool, error) {
		cfg, err := load()
		if err != nil {
			return nil, err
		}
		for _, def := range cfg.Sinks {
			if def.Name == name && def.Driver == "ami" && def.Method == "maintenance" {
				return sink.SinkEndpoints(def, cfg), nil
			}
		}
		return nil, fmt.Errorf("no method=maintenance sink %s any more", name)
	}
}
