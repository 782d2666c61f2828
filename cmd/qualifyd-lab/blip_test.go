package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBlipShort takes qualifyd's own link to 1,000 peers (100 of them
// really dead) down for 15 s and for 60 s, with the soak's policy (F=10 s,
// T=2 s, N=3, R=1 s), the real Kamailio dispatcher and a webhook receiver
// as sinks: no object up before a blip stays pushed down (one pushed
// before the panic began, of the blip's own event, is taken back when it
// begins; none during or after it), no dead one is pushed up, the panic begins
// and ends, and both routers are as before once it is over. It runs when
// QUALIFYD_LAB=1 (make lab, part of make test); then a missing privilege
// or tool is a failure, not a skip. The time until the routers were as
// before is logged, not asserted.
func TestBlipShort(t *testing.T) {
	if os.Getenv("QUALIFYD_LAB") != "1" {
		t.Skip("the real-network lab runs under make lab (QUALIFYD_LAB=1, root, kamailio, nft, ip)")
	}
	t.Parallel() // the other lab run beside it: each has its own namespaces, and they wait more than they work
	s := soakBlip()
	// Watch is F + T: every contact has been probed again since the blip
	// ended, so a down carried over from it would have been pushed.
	s.AoRs, s.Dead, s.Watch = 1000, 100, time.Duration(s.Frequency)*time.Second+s.Timeout
	s.Dir, s.Qualifyd = t.TempDir(), qualifydBinary(t)
	s.KamCfg, _ = filepath.Abs("../qualifyd/testdata/kamailio/kamailio.cfg")
	var progress strings.Builder
	rows, err := blip(context.Background(), s, &progress)
	var table strings.Builder
	printBlip(&table, s, rows)
	t.Log("\n" + progress.String() + table.String())
	if err != nil {
		t.Fatalf("blip: %v (logs in %s)", err, s.Dir)
	}
	for _, r := range rows {
		if r.falseDowns() != 0 {
			t.Errorf("blip %v: kamailio false downs %v (%d taken back), webhook %v (%d taken back), dead ups %d/%d: want none left",
				r.Blip, r.FalseKamailio, r.TakenKamailio, r.FalseWebhook, r.TakenWebhook, r.DeadUpKamailio, r.DeadUpWebhook)
		}
		if r.PanicAt < 0 || r.CalmAt < 0 {
			t.Errorf("blip %v: panic from %v to %v: want one that began and ended", r.Blip, r.PanicAt, r.CalmAt)
		}
	}
}
