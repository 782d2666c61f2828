package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
)

// TestRunCoalesceFlag: --coalesce defaults to the engine's default, 0
// asks the engine for exact starts, and values outside 0..1s are refused.
func TestRunCoalesceFlag(t *testing.T) {
	for _, c := range []struct {
		args   []string
		want   time.Duration // engine.Config.Coalesce
		errHas string
	}{
		{args: nil, want: engine.DefaultCoalesce},
		{args: []string{"--coalesce", "5ms"}, want: 5 * time.Millisecond},
		{args: []string{"--coalesce", "0"}, want: -1},
		{args: []string{"--coalesce", "-1ms"}, errHas: "--coalesce -1ms: want 0 to 1s"},
		{args: []string{"--coalesce", "2s"}, errHas: "--coalesce 2s: want 0 to 1s"},
	} {
		o, err := parseRun(append([]string{"--config", "x.conf"}, c.args...), io.Discard)
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%q: error %v, want %q", c.args, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if got := engineCoalesce(o.coalesce); got != c.want {
			t.Errorf("%q: engine coalesce %v, want %v", c.args, got, c.want)
		}
	}
}

// TestRunStateFileFlag: --state-file is off by default and reaches the
// daemon's configuration.
func TestRunStateFileFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{{nil, ""}, {[]string{"--state-file", "/var/lib/qualifyd/state"}, "/var/lib/qualifyd/state"}} {
		o, err := parseRun(append([]string{"--config", "x.conf", "--http", ""}, c.args...), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := o.daemonConfig(io.Discard, io.Discard).StateFile; got != c.want {
			t.Errorf("%q: StateFile %q, want %q", c.args, got, c.want)
		}
	}
}

// TestRunReloadAllowShrinkFlag: --reload-allow-shrink is off by default
// and reaches the daemon's configuration.
func TestRunReloadAllowShrinkFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--reload-allow-shrink"}, true}} {
		o, err := parseRun(append([]string{"--config", "x.conf", "--http", ""}, c.args...), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := o.daemonConfig(io.Discard, io.Discard).ReloadAllowShrink; got != c.want {
			t.Errorf("%q: ReloadAllowShrink %v, want %v", c.args, got, c.want)
		}
	}
}

// TestRunHistoryAoRsFlag: --history-aors defaults to the engine's
// default, 0 keeps no history, and a negative count is refused.
func TestRunHistoryAoRsFlag(t *testing.T) {
	for _, c := range []struct {
		args   []string
		want   int // daemon.Config.HistoryAoRs
		errHas string
	}{
		{args: nil, want: engine.DefaultHistoryAoRs},
		{args: []string{"--history-aors", "20"}, want: 20},
		{args: []string{"--history-aors", "0"}, want: -1},
		{args: []string{"--history-aors", "-1"}, errHas: "--history-aors -1: want 0 or more"},
	} {
		o, err := parseRun(append([]string{"--config", "x.conf", "--http", ""}, c.args...), io.Discard)
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%q: error %v, want %q", c.args, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := o.daemonConfig(io.Discard, io.Discard).HistoryAoRs; got != c.want {
			t.Errorf("%q: HistoryAoRs %d, want %d", c.args, got, c.want)
		}
	}
}
