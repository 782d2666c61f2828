package engine

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestSnapshotShowsTheNInUse: with qualify_failures=auto, a contact that learned a clean link
// holds N = 2, and its failure events and its snapshot say 2, not the 3 of a contact without
// history (qualify-semantics §5.1, §10).
func TestSnapshotShowsTheNInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dead := 5 * time.Hour // 600 answered probes: p = 1/700 < 0.00186
		h := newHarness(t, Config{}, answersUntil(dead))
		p := referencePolicy()
		p.Failures, p.FailuresAuto = 0, true
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(dead + 5*time.Second)
		failed := h.eventsOf(ProbeFailed)
		if len(failed) != 1 || failed[0].Failures != 1 || failed[0].FailureThreshold != 2 {
			t.Fatalf("failure events %+v, want one at 1/2", failed)
		}
		if c := h.e.Contacts()[0]; c.Status != qualify.Reachable || c.FailureThreshold != 2 || p.FailureThreshold() != 3 {
			t.Fatalf("snapshot %+v, want Reachable at 1/2 (without history: %d)", c, p.FailureThreshold())
		}
		h.until(dead + 40*time.Second)
		if c := h.e.Contacts()[0]; c.Status != qualify.Unreachable || c.Failures != 2 || c.FailureThreshold != 2 {
			t.Fatalf("snapshot %+v, want Unreachable at 2/2", c)
		}
		h.stop()
	})
}
