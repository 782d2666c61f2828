package cluster

import (
	"testing"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestTallyMembersMoveVantages: with vantages=2 of three nodes, a
// vantage leaving hands its place to the third node, whose silence keeps
// the status, and whose vote then counts (a split of two keeps the
// status; both agreeing decide); a stale vote of a node that is not a
// vantage never counts.
func TestTallyMembersMoveVantages(t *testing.T) {
	const contact = "t/sip:192.0.2.1:5060"
	all := []string{"a", "b", "c"}
	vs := Assign(contact, all, 2)
	x, y := vs[0], vs[1]
	z := ""
	for _, n := range all {
		if n != x && n != y {
			z = n
		}
	}
	tl := newTally(Majority, 2)
	tl.members(all)
	if _, ok := tl.vote(contact, z, U); ok {
		t.Fatalf("the vote of %s, not a vantage, decided", z)
	}
	tl.vote(contact, x, U)
	if v, ok := tl.vote(contact, y, U); !ok || v.Status != U {
		t.Fatalf("two vantages say Unreachable: %+v %v", v, ok)
	}
	tl.vote(contact, z, qualify.NonQualified) // z withdraws its stale vote
	if got := tl.members([]string{x, z}); len(got) != 0 {
		t.Fatalf("%s left, %s has no vote: %+v, want no change", y, z, got)
	}
	if v, ok := tl.vote(contact, z, R); ok {
		t.Fatalf("%s says Reachable with %s Unreachable of 2: %+v, want no change (a split keeps the status)", z, x, v)
	}
	if v, ok := tl.vote(contact, x, R); !ok || v.Status != R || v.From != U {
		t.Fatalf("both vantages %s and %s say Reachable: %+v %v, want Reachable", x, z, v, ok)
	}
}

// TestTallySeedKeepsRecordedStatus: a recorded status is what a split
// keeps; a status the tally decided is never overwritten by a seed.
func TestTallySeedKeepsRecordedStatus(t *testing.T) {
	tl := newTally(Majority, 3)
	tl.members([]string{"a", "b", "c"})
	tl.seed("k", U)
	tl.vote("k", "a", U)
	if _, ok := tl.vote("k", "b", R); ok || tl.status["k"] != U {
		t.Fatalf("split after a recorded Unreachable: %v", tl.status["k"])
	}
	tl.vote("k", "c", R)
	tl.seed("k", U)
	if tl.status["k"] != R {
		t.Fatalf("a seed overwrote the decided status: %v", tl.status["k"])
	}
}
