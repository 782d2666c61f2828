package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// The quiet trunk's figure (docs/performance.md): two identical healthy
// SIPp trunks, each carrying a call every 5 s through its own real
// Kamailio, whose lines post the calls' outcomes to one qualifyd; the
// reference policy F=30 T=3 N=3 R=2 on both, qualify_quiet_only=yes on
// one: the OPTIONS each trunk receives in the window (QUALIFYD_FIGURE_WINDOW,
// 10m by default), as a ratio against the trunk without the option in the
// same run, and how long after qualifyd heard the quiet trunk's last call
// it is probed again. Run by `make figures-quiet` (QUALIFYD_FIGURES=1):
// the window and about 40 s more, not part of make test
// (TestKamailioQuietTrunk is its short form).
func TestFigureCallsQuiet(t *testing.T) {
	if os.Getenv("QUALIFYD_FIGURES") != "1" {
		t.Skip("the quiet trunk's figure runs under make figures-quiet (QUALIFYD_FIGURES=1): ten minutes")
	}
	window := 10 * time.Minute
	if w, err := time.ParseDuration(os.Getenv("QUALIFYD_FIGURE_WINDOW")); err == nil && w > 0 {
		window = w
	}
	run := quietRun{f: figF, qualify: refQualify, call: figCall, window: window}
	res := runQuiet(t, run)
	ratio := "n/a"
	if res.plain > 0 {
		ratio = strconv.FormatFloat(float64(res.quiet)/float64(res.plain), 'f', 2, 64) + "x"
	}
	t.Logf("FIGURE kamailio quiet trunk: a call every %v, F=30 T=3 N=3 R=2, %v: OPTIONS %d with qualify_quiet_only against %d without (%s); probed again %.2f s after qualifyd heard the last call (F %v)",
		run.call, window, res.quiet, res.plain, ratio, res.back.Seconds(), figF)
	if res.quiet != 0 || res.back > figF+3*time.Second {
		t.Errorf("want no OPTIONS with the option, and probing back F after the last call, within T (3s)")
	}
}
