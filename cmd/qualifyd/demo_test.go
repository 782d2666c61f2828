package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestPhaseAt(t *testing.T) {
	for _, tc := range []struct {
		at   time.Duration
		name string
	}{
		{0, "healthy"}, {10500 * time.Millisecond, "one probe lost"}, {25 * time.Second, "lossy: half of the requests dropped"},
		{40 * time.Second, "dead: no answers"}, {100 * time.Second, "dead: no answers"}, {59 * time.Second, "recovered"},
	} {
		if got := phaseAt(tc.at).name; got != tc.name {
			t.Errorf("phaseAt(%v) = %q, want %q", tc.at, got, tc.name)
		}
	}
}

func TestDemoTally(t *testing.T) {
	tally := newDemoTally()
	ev := func(aor string, to qualify.Status) engine.Event {
		return engine.Event{Kind: engine.StatusChanged, AoR: aor, To: to}
	}
	tally.observe(ev("a", qualify.Unreachable), 11*time.Second) // false: peer up
	tally.observe(ev("a", qualify.Reachable), 15*time.Second)
	tally.observe(ev("a", qualify.Unreachable), 41*time.Second) // dead spell from 38 s
	tally.observe(ev("a", qualify.Reachable), 50*time.Second)
	tally.observe(ev("b", qualify.Unreachable), 47*time.Second)
	tally.observe(ev("c", qualify.Unreachable), 62*time.Second) // false, still open at the end
	tally.finish(65 * time.Second)
	var out bytes.Buffer
	tally.print(&out)
	for _, want := range []string{
		"a         false outages 1 (4.0s unroutable), dead peer detected after [3s]",
		"b         false outages 0 (0.0s unroutable), dead peer detected after [9s]",
		"c         false outages 1 (3.0s unroutable), dead peer detected after []",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoRefusesArguments: demo takes flags only; a stray argument is a
// usage error, not a reason to ignore the flags after it.
func TestDemoRefusesArguments(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"demo", "extra", "--duration", "1s"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), `unexpected argument "extra"`) || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
