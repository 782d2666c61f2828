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

// TestTallyAdoptsRecordedWhereVotesKeep: a new leader's tally takes the
// recorded verdict where the votes decide nothing (a split, or silence),
// so that a failover never flips a route because two nodes' tallies
// kept different previous statuses; where the votes decide, its own
// status stands, and a record that is no verdict is never adopted.
func TestTallyAdoptsRecordedWhereVotesKeep(t *testing.T) {
	tests := []struct {
		name     string
		votes    map[string]qualify.Status
		own, rec qualify.Status
		want     qualify.Status
		changed  bool
	}{
		{"split keeps: adopt", map[string]qualify.Status{"a": U, "b": R}, R, U, U, true},
		{"silence keeps: adopt", nil, qualify.NonQualified, U, U, true},
		{"majority down decides", map[string]qualify.Status{"a": U, "b": U}, U, R, U, false},
		{"majority up decides", map[string]qualify.Status{"a": R, "b": R, "c": U}, R, U, R, false},
		{"same", map[string]qualify.Status{"a": U, "b": R}, U, U, U, false},
		{"record no verdict", map[string]qualify.Status{"a": U, "b": R}, R, qualify.NonQualified, R, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTally(Majority, 3)
			tl.members([]string{"a", "b", "c"})
			tl.seed("k", tt.own)
			for n, s := range tt.votes {
				tl.vote("k", n, s)
			}
			if tl.status["k"] != tt.own {
				t.Fatalf("the votes %v moved the tally to %v before the test", tt.votes, tl.status["k"])
			}
			v, ok := tl.adopt("k", tt.rec)
			if ok != tt.changed || tl.status["k"] != tt.want || (ok && (v.From != tt.own || v.Status != tt.rec || len(v.Votes) != 3)) {
				t.Fatalf("own %v, recorded %v, votes %v: adopt = %+v %v, status %v; want %v (changed %v)", tt.own, tt.rec, tt.votes, v, ok, tl.status["k"], tt.want, tt.changed)
			}
		})
	}
}

// TestTallyDrain: a Reachable contact drains while one live vantage's
// vote says its peer asked for a pause (a change the verdict carries
// alone), not once the vote drops it, its voter leaves, or the cluster
// says Unreachable.
func TestTallyDrain(t *testing.T) {
	const contact = "t/sip:192.0.2.1:5060"
	tl := newTally(Majority, 3)
	tl.members([]string{"a", "b", "c"})
	tl.vote(contact, "a", R)
	tl.vote(contact, "b", R)
	drain := func(node string, s qualify.Status) (Verdict, bool) {
		return tl.voteIn(contact, node, mark{status: s, drain: true})
	}
	for i, c := range []struct {
		step           func() (Verdict, bool)
		changed, drain bool
		status         qualify.Status
	}{
		{func() (Verdict, bool) { return drain("c", R) }, true, true, R},
		{func() (Verdict, bool) { return drain("a", R) }, false, true, R},
		{func() (Verdict, bool) { return tl.vote(contact, "a", R) }, false, true, R},
		{func() (Verdict, bool) { return tl.vote(contact, "c", R) }, true, false, R},
		{func() (Verdict, bool) { return drain("c", R) }, true, true, R},
		{func() (Verdict, bool) { v := tl.members([]string{"a", "b"}); return first(v) }, true, false, R},
		{func() (Verdict, bool) { v := tl.members([]string{"a", "b", "c"}); return first(v) }, true, true, R},
		{func() (Verdict, bool) { tl.vote(contact, "a", U); return drain("b", U) }, true, false, U},
	} {
		v, changed := c.step()
		if changed != c.changed || tl.draining[contact] != c.drain || tl.status[contact] != c.status || (changed && v.Draining != c.drain) {
			t.Fatalf("step %d: %+v changed %v, draining %v status %v; want changed %v draining %v status %v",
				i, v, changed, tl.draining[contact], tl.status[contact], c.changed, c.drain, c.status)
		}
	}
}

// first returns the first of vs, false for none.
func first(vs []Verdict) (Verdict, bool) {
	if len(vs) == 0 {
		return Verdict{}, false
	}
	return vs[0], true
}
