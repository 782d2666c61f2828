package cluster

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestNewLeaderAdoptsRecordedVerdict: a node that takes the lease while
// its tally keeps another status than the one recorded (the votes split,
// so each node keeps what it had) adopts the recorded verdict at once:
// the hook hears it before the Leading edge, and it is not written again.
func TestNewLeaderAdoptsRecordedVerdict(t *testing.T) {
	const k = "t/sip:192.0.2.1"
	c := bare(false, nil)
	var heard []string
	c.hooks.Verdict = func(v Verdict) { heard = append(heard, v.From.String()+"->"+v.Status.String()) }
	c.hooks.Leading = func(l bool) { heard = append(heard, "leading") }
	c.l.tally.seed(k, qualify.Reachable)
	c.voteEntry(voted(k, "a", qualify.Unreachable))
	c.voteEntry(voted(k, "b", qualify.Reachable))
	c.l.recorded[k] = qualify.Unreachable
	now := time.Now()
	c.setLeading(true, now, now.Add(time.Minute))
	if got := strings.Join(heard, " "); got != "Reachable->Unreachable leading" {
		t.Fatalf("hooks heard %q, want the recorded verdict adopted, then the Leading edge", got)
	}
	if s := c.Status(k); s != qualify.Unreachable {
		t.Fatalf("status %v after taking the lease, want the recorded Unreachable", s)
	}
	if _, queued := c.l.recordsOut[k]; queued {
		t.Fatalf("records to write %v: the adopted verdict is already the record", c.l.recordsOut)
	}
}

// TestVouchNeedsOwnVotesBack: a node vouches for its verdicts while its
// own votes come back through the votes watch: with a vote outstanding
// and none back for MemberTTL it stops (the sinks withhold their
// heartbeats), and a vote coming back resumes it; out of the cluster it
// never vouches.
func TestVouchNeedsOwnVotesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = "t/sip:192.0.2.1"
		c := bare(true, nil)
		c.member = term{6 * time.Second}
		if err := c.Vouch(); err == nil || !strings.Contains(err.Error(), "out of the cluster") {
			t.Fatalf("never announced: Vouch = %v, want out of the cluster", err)
		}
		c.memberSent = time.Now().Add(time.Hour) // membership renewed throughout
		c.Report(k, qualify.Unreachable)
		time.Sleep(6 * time.Second)
		if err := c.Vouch(); err != nil {
			t.Fatalf("a vote outstanding for MemberTTL: Vouch = %v, want nil", err)
		}
		time.Sleep(time.Millisecond)
		err := c.Vouch()
		if want := "1 of this node's votes have not come back through NATS for 6s (member_ttl 6s): its verdicts may be stale"; err == nil || err.Error() != want {
			t.Fatalf("a vote outstanding past MemberTTL: Vouch = %v, want %q", err, want)
		}
		c.voteEntry(voted(k, "a", qualify.Unreachable))
		if err := c.Vouch(); err != nil {
			t.Fatalf("the vote came back: Vouch = %v, want nil", err)
		}
		c.memberSent = time.Now().Add(-time.Hour)
		if err := c.Vouch(); err == nil {
			t.Fatal("membership lapsed: Vouch = nil, want out of the cluster")
		}
	})
}
