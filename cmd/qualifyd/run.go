package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/daemon"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/web"
)

// runOptions are the flags of `qualifyd run`.
type runOptions struct {
	config    string
	configDir string
	httpAddr  string
	sipBind   string
	logFormat string
	token     string
	tokenFile string
	perAoR    int
	coalesce  time.Duration
	stateFile string
	// allowShrink lets a reload drop every AoR or most contacts.
	allowShrink bool
	histAoRs    int
	node        string
}

func parseRun(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, "run --config FILE [flags]")
	fs.StringVar(&o.config, "config", "", "qualifyd's configuration file (pjsip.conf syntax; may #include the PBX's files)")
	fs.StringVar(&o.configDir, "config-dir", "", "directory relative #include paths resolve against (Asterisk's astetcdir; default: the config file's directory)")
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:8089", "HTTP API, metrics and status page address; empty disables HTTP")
	fs.StringVar(&o.sipBind, "sip-bind", "", "local UDP address of the probe socket (default: an ephemeral port on all interfaces)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text (Asterisk's lines) or json")
	fs.StringVar(&o.token, "token", "", "bearer token required by the API's write routes (prefer --token-file)")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
	fs.IntVar(&o.perAoR, "metrics-per-aor", 0, "export per-AoR metric series for at most this many AoRs (0: none)")
	fs.StringVar(&o.stateFile, "state-file", "", "keep the contacts' state and the event ids across restarts in this file, and the AoRs' histories in FILE.history (e.g. /var/lib/qualifyd/state; default: none)")
	fs.BoolVar(&o.allowShrink, "reload-allow-shrink", false, "let a reload (SIGHUP or the API) apply a configuration that drops every AoR or more than half of the contacts")
	fs.IntVar(&o.histAoRs, "history-aors", engine.DefaultHistoryAoRs, "keep a 24-hour history for at most this many AoRs, the first in configuration order (0: none)")
	fs.StringVar(&o.node, "node", "", "this node's name in the configuration's type=cluster section (default: the host's short name, if it is one of the nodes); an error without a cluster section")
	fs.DurationVar(&o.coalesce, "coalesce", engine.DefaultCoalesce, "start the probes due within this window in one wake-up, each at most this late (0: each at its due time)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return o, err
	}
	if len(pos) > 0 {
		return o, fmt.Errorf("unexpected arguments %q", pos)
	}
	if o.config == "" {
		return o, errors.New("--config FILE is required")
	}
	if o.histAoRs < 0 {
		return o, fmt.Errorf("--history-aors %d: want 0 or more", o.histAoRs)
	}
	if o.coalesce < 0 || o.coalesce > time.Second {
		return o, fmt.Errorf("--coalesce %v: want 0 to 1s", o.coalesce)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return o, fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	if err := o.readToken(); err != nil {
		return o, err
	}
	if o.httpAddr != "" {
		return o, web.ListenCheck(o.httpAddr, o.token)
	}
	return o, nil
}

// readToken loads --token-file into token.
func (o *runOptions) readToken() error {
	if o.tokenFile == "" {
		return nil
	}
	if o.token != "" {
		return errors.New("--token and --token-file are exclusive")
	}
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	o.token = string(bytes.TrimSpace(b))
	if o.token == "" {
		return fmt.Errorf("--token-file %s: empty", o.tokenFile)
	}
	return nil
}

// daemonConfig is the daemon's configuration for the flags o.
func (o runOptions) daemonConfig(stdout, stderr io.Writer) daemon.Config {
	return daemon.Config{
		ConfigFile: o.config, ConfigDir: o.configDir, SIPBind: o.sipBind, Coalesce: engineCoalesce(o.coalesce),
		HTTPAddr: o.httpAddr, Token: o.token, PerAoR: o.perAoR, Version: version(), StateFile: o.stateFile,
		ReloadAllowShrink: o.allowShrink, Node: o.node,
		HistoryAoRs: historyAoRs(o.histAoRs),
		Log:         stdout, LogFormat: o.logFormat, Errors: stderr,
	}
}

// runDaemon is `qualifyd run`: qualify the configured AoRs until SIGINT or
// SIGTERM, reloading on SIGHUP.
func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "qualifyd run:", err)
		}
		return usageExit(err)
	}
	daemon.TuneGC(os.Getenv)
	cfg := o.daemonConfig(stdout, stderr)
	cfg.Notify, cfg.Watchdog = serviceManager(stderr)
	d, err := daemon.New(cfg)
	if err == nil {
		err = d.Run(ctx)
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") { // a configuration's errors, one a line
			fmt.Fprintln(stderr, "qualifyd run:", line)
		}
		return 1
	}
	return 0
}

// historyAoRs maps --history-aors to engine.Config.HistoryAoRs, where
// zero is the default and a negative value none.
func historyAoRs(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// engineCoalesce maps --coalesce to engine.Config.Coalesce, where zero
// means the default and a negative value exact starts.
func engineCoalesce(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
