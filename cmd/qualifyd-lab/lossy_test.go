package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shortSettings is the lossy run inside `make test`: one loss level and a
// short dead spell, about a minute.
func shortSettings(t *testing.T) settings {
	s := fullSettings()
	s.Losses, s.LossDuration = []int{20}, 30*time.Second
	s.Dead, s.Recover, s.SimDays = 12*time.Second, 10*time.Second, 5
	s.Dir = t.TempDir()
	s.Qualifyd = qualifydBinary(t)
	return s
}

// qualifydBinary is $QUALIFYD_BIN (make lab builds it), or a fresh build.
func qualifydBinary(t *testing.T) string {
	if bin := os.Getenv("QUALIFYD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "qualifyd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/qualifyd/qualifyd/cmd/qualifyd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build qualifyd: %v\n%s", err, out)
	}
	return bin
}

// TestLossyShort runs the experiment on a real lossy path (namespaces,
// nftables, SIPp, qualifyd, Kamailio) and checks only facts that hold
// whatever the machine's speed: no timing margin is asserted. It runs
// when QUALIFYD_LAB=1 (make lab, part of make test); then a missing
// privilege or tool is a failure, not a skip.
func TestLossyShort(t *testing.T) {
	if os.Getenv("QUALIFYD_LAB") != "1" {
		t.Skip("the real-network lab runs under make lab (QUALIFYD_LAB=1, root, sipp, kamailio, nft, ip)")
	}
	t.Parallel() // the other lab run beside it: each has its own namespaces, and they wait more than they work
	s := shortSettings(t)
	var progress strings.Builder
	rep, err := lossy(context.Background(), s, &progress)
	t.Log("\n" + progress.String())
	if err != nil {
		t.Fatalf("lossy: %v (logs in %s)", err, s.Dir)
	}
	var table strings.Builder
	_ = rep.print(&table, false)
	t.Log("\n" + table.String())
	checkPhases(t, rep.Phases)
	checkDead(t, rep.Dead)
	checkClean(t, rep.Loss)
}

// checkPhases: the impairment did what it says. Clean phases dropped
// nothing, the lossy one dropped something, the dead one every request.
func checkPhases(t *testing.T, phases []reportPhase) {
	t.Helper()
	for _, p := range phases {
		dropped := p.RequestsDropped + p.ResponsesDropped
		switch {
		case p.Dead && (p.Requests == 0 || p.RequestsDropped != p.Requests):
			t.Errorf("dead phase: %d of %d requests dropped, want all", p.RequestsDropped, p.Requests)
		case !p.Dead && p.LossPercent == 0 && dropped != 0:
			t.Errorf("phase %s: %d packets dropped without loss", p.Name, dropped)
		case !p.Dead && p.LossPercent > 0 && dropped == 0:
			t.Errorf("phase %s: nothing dropped of %d requests", p.Name, p.Requests)
		}
	}
}

// checkDead: every prober was routable when the path died, saw it die,
// and saw it come back.
func checkDead(t *testing.T, rows []deadRow) {
	t.Helper()
	if len(rows) != len(probers) {
		t.Fatalf("%d dead-spell rows, want %d", len(rows), len(probers))
	}
	for _, r := range rows {
		if r.AlreadyDown || !r.Detected || !r.Recovered {
			t.Errorf("%s: already down %v, detected %v, recovered %v; want false, true, true", r.Prober, r.AlreadyDown, r.Detected, r.Recovered)
		}
		if r.PredictedDetectionWorstS <= 0 {
			t.Errorf("%s: no prediction from qualifyd simulate", r.Prober)
		}
	}
}

// checkClean: the N-failure policy never took the peer down while no
// packet was dropped.
func checkClean(t *testing.T, rows []lossRow) {
	t.Helper()
	seen := false
	for _, r := range rows {
		if r.Prober == proberN3 && r.LossPercent == 0 {
			seen = true
			if r.FalseOutages != 0 {
				t.Errorf("qualifyd N=3: %d outages while nothing was dropped", r.FalseOutages)
			}
		}
	}
	if !seen {
		t.Error("no loss-free row for qualifyd N=3")
	}
}
