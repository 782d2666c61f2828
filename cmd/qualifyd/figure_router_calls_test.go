package main

import (
	"os"
	"testing"
	"time"
)

// callFigureScale is the fuller run's: the reference policy F=30 T=3
// N=3 R=2 (figQualify), a call every 5 s, a 10 minute window.
var callFigureScale = callScale{
	qualify: figQualify,
	f:       figF, t: 3 * time.Second, gap: 2 * time.Second,
	call: figCall, window: 10 * time.Minute,
}

// TestFigureCallsAsterisk runs TestAsteriskQuietTrunk,
// TestAsteriskFailedCallsBurst and TestAsteriskDrain at the reference
// policy, side by side, for docs/performance.md: a quiet trunk over 10
// minutes against a twin without qualify_quiet_only, 20 failed calls in
// 2 s against a trunk without calls, and a drain of Retry-After: 20.
// About 12 minutes; QUALIFYD_FIGURES=1 runs it (not part of make test):
//
//	QUALIFYD_FIGURES=1 go test -count=1 -timeout 30m -v -run '^TestFigureCallsAsterisk$' ./cmd/qualifyd/ | grep -E 'FIGURE|^(---|ok|FAIL)'
func TestFigureCallsAsterisk(t *testing.T) {
	if os.Getenv("QUALIFYD_FIGURES") != "1" {
		t.Skip("the calls' Asterisk figures run with QUALIFYD_FIGURES=1: about 12 minutes")
	}
	t.Run("quiet trunk", func(t *testing.T) { t.Parallel(); quietTrunk(t, callFigureScale) })
	t.Run("failed calls", func(t *testing.T) { t.Parallel(); failedCallsBurst(t, callFigureScale) })
	t.Run("drain", func(t *testing.T) { t.Parallel(); drain(t, callFigureScale) })
}
