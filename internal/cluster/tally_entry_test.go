package cluster

import (
	"testing"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestTallyVotesByNodeIndex: votes are kept per node whatever the order
// the nodes first vote in, a withdrawn vote counts for nothing, a node
// outside the configuration's names counts like any other, and a
// withdrawal of a contact never voted on adds nothing.
func TestTallyVotesByNodeIndex(t *testing.T) {
	const contact = "t/sip:192.0.2.2:5060"
	tl := newTally(Majority, 3)
	tl.members([]string{"a", "b", "x"})
	tl.vote(contact, "x", U)
	tl.vote(contact, "b", R)
	if v, ok := tl.vote(contact, "a", U); !ok || v.Status != U {
		t.Fatalf("a and x say Unreachable: %+v %v", v, ok)
	}
	for node, want := range map[string]qualify.Status{"a": U, "b": R, "x": U, "c": qualify.NonQualified} {
		if got := tl.voteOf(contact, node); got != want {
			t.Errorf("vote of %s %v, want %v", node, got, want)
		}
	}
	tl.vote(contact, "x", qualify.Removed)
	if got := tl.voteOf(contact, "x"); got != qualify.NonQualified {
		t.Fatalf("x withdrew, its vote is %v", got)
	}
	if v, ok := tl.vote(contact, "x", R); !ok || v.Status != R {
		t.Fatalf("b and x say Reachable: %+v %v", v, ok)
	}
	if _, ok := tl.vote("other", "a", qualify.NonQualified); ok || len(tl.contacts) != 1 {
		t.Fatalf("a withdrawal of an unknown contact made an entry: %v", tl.contacts)
	}
}

// TestTallyUnrecorded: a new leader queues the statuses the verdicts
// bucket does not hold, and never a removal of a record for a contact
// it has no status of.
func TestTallyUnrecorded(t *testing.T) {
	tl := newTally(Majority, 1)
	tl.members([]string{"a"})
	tl.vote("same", "a", U)
	tl.record("same", U)
	tl.vote("new", "a", R)
	tl.record("theirs", U) // recorded by another leader, not decided here
	got := map[string]qualify.Status{}
	tl.unrecorded(func(contact string, s qualify.Status) { got[contact] = s })
	if len(got) != 1 || got["new"] != R {
		t.Fatalf("unrecorded %v, want only new=Reachable", got)
	}
	if tl.recorded("theirs") != U || tl.status("theirs") != qualify.NonQualified {
		t.Fatalf("theirs: recorded %v status %v", tl.recorded("theirs"), tl.status("theirs"))
	}
}
