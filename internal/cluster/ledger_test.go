package cluster

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// in is one input to the ledger, as the watches and the node give them.
type in func(l *ledger) outcome

// memberIn is node's announcement in run, or its removal (run "-").
func memberIn(node, run string) in { return memberAt(node, run, 0) }

// memberAt is memberIn as the entry at KV revision rev.
func memberAt(node, run string, rev uint64) in {
	return func(l *ledger) outcome {
		live, changed, o := l.member(node, announcement{Run: run}, run == "-", rev, time.Time{})
		if changed {
			d := l.decideMembers(live)
			o.Verdicts, o.Write = append(o.Verdicts, d.Verdicts...), o.Write || d.Write
		}
		return o
	}
}

// voteIn is node's vote of contact k, cast in run.
func voteIn(node, run string, s qualify.Status) in { return voteAt(node, run, s, 0) }

// voteAt is voteIn as the entry at KV revision rev.
func voteAt(node, run string, s qualify.Status, rev uint64) in {
	return func(l *ledger) outcome { return l.vote("k", node, run, s, rev, time.Time{}) }
}

// recordIn is the verdicts bucket's record of k.
func recordIn(s qualify.Status) in { return recordAt(s, 0) }

// recordAt is recordIn as the entry at KV revision rev; NonQualified
// for the record's removal.
func recordAt(s qualify.Status, rev uint64) in {
	return func(l *ledger) outcome {
		if s == qualify.NonQualified {
			l.forget("k", true, rev)
			return outcome{}
		}
		l.record("k", s, rev)
		return outcome{}
	}
}

// seedIn ends the first pass over the verdicts bucket.
func seedIn() in { return func(l *ledger) outcome { l.seed(); return outcome{} } }

// leadIn is a leading edge: the verdicts adopted, and the orphans.
func leadIn() in {
	return func(l *ledger) outcome {
		vs, _ := l.lead(true)
		return outcome{Verdicts: vs, Write: l.pending() > 0}
	}
}

// brief is an outcome as the table says it: "Reachable" for a verdict,
// "+write" for a write queued, "+foreign x" for a foreign node first
// seen; "" for nothing.
func brief(o outcome) string {
	var parts []string
	for _, v := range o.Verdicts {
		parts = append(parts, v.Status.String())
	}
	if o.Write {
		parts = append(parts, "+write")
	}
	if o.Foreign != "" {
		parts = append(parts, "+foreign "+o.Foreign)
	}
	return strings.Join(parts, " ")
}

// TestLedger feeds the ledger of node a (run r2) sequences of inputs and
// checks each one's outcome: the verdicts it hands the hook, whether it
// queued a write, and a foreign node first seen.
func TestLedger(t *testing.T) {
	const U, R = qualify.Unreachable, qualify.Reachable
	type step struct {
		in   in
		want string
	}
	tests := []struct {
		name  string
		q     Quorum
		steps []step
	}{
		{"a restarted node's votes of its previous run never count", Any, []step{
			{memberIn("a", "r2"), ""}, {memberIn("b", "r1"), ""}, {memberIn("c", "r1"), ""},
			{voteIn("a", "r2", R), ""}, // a's own vote of this run: its echo
			{voteIn("b", "r1", R), ""}, {voteIn("c", "r1", R), "Reachable"},
			{voteIn("b", "r1", U), "Unreachable"},
			{memberIn("b", "-"), "Reachable"},
			{memberIn("b", "r3"), ""},  // b restarted: its Unreachable of r1 is still in the bucket
			{voteIn("b", "r3", R), ""}, // its first vote of r3
			{voteIn("b", "r3", U), "Unreachable"},
		}},
		{"this node's vote of its previous run is withdrawn", Majority, []step{
			{memberIn("a", "r2"), ""},
			{voteIn("a", "r1", U), "+write"},
			{voteIn("a", "r1", qualify.NonQualified), ""}, // its withdrawal read back: nothing more to write
		}},
		{"a node not in nodes= is no member and no voter, logged once", Any, []step{
			{memberIn("a", "r2"), ""}, {memberIn("b", "r1"), ""}, {memberIn("c", "r1"), ""},
			{voteIn("b", "r1", R), ""}, {voteIn("c", "r1", R), ""}, {voteIn("a", "r2", R), "Reachable"},
			{memberIn("x", "r9"), "+write +foreign x"},
			{voteIn("x", "r9", U), "+write"},
			{voteIn("d", "", U), "+write +foreign d"}, // a node removed from nodes=
			{memberIn("x", "-"), ""},
		}},
		{"this node's votes of its previous run never count, even under its stale announcement", Any, []step{
			{memberIn("a", "r1"), ""}, {memberIn("b", "r1"), ""}, {memberIn("c", "r1"), ""}, // a replica of before a's restart
			{recordIn(R), ""}, {seedIn(), ""},
			{voteIn("b", "r1", R), ""}, {voteIn("c", "r1", R), ""},
			{voteIn("a", "r1", U), "+write"}, // withdrawn, not counted
		}},
		{"a new leader adopts the recorded verdict where the votes decide nothing", Majority, []step{
			{memberIn("a", "r2"), ""}, {memberIn("b", "r1"), ""}, {memberIn("c", "r1"), ""},
			{seedIn(), ""}, {recordIn(U), ""}, // the last leader's record, after the first pass
			{voteIn("b", "r1", U), ""}, {voteIn("c", "r1", R), ""}, // a split: nothing decided
			{leadIn(), "Unreachable"},                  // adopted: the record already, nothing to write
			{voteIn("b", "r1", R), "Reachable +write"}, // decided while leading: recorded
		}},
		// A watch may run on a replica still catching up (a restarted
		// node's server, on its old store): it delivers the entries it
		// holds, older than those already applied. No key goes back to
		// an older revision; the same revision again changes nothing.
		{"a restarted node's announcement of its previous run, read again from a stale replica, is dropped", Any, []step{
			{memberAt("a", "r2", 1), ""}, {memberAt("c", "r1", 2), ""}, {memberAt("b", "r1", 5), ""},
			{voteAt("a", "r2", R, 1), ""}, {voteAt("c", "r1", R, 2), ""},
			{voteAt("b", "r1", R, 3), "Reachable"}, {voteAt("b", "r1", U, 4), "Unreachable"},
			{memberAt("b", "-", 6), "Reachable"}, // b's membership lapsed
			{memberAt("b", "r3", 7), ""},         // b restarted: its Unreachable of r1 is still in the bucket
			{memberAt("b", "r1", 5), ""},         // a's watch started again on b's server, not caught up yet
			{voteAt("b", "r1", U, 4), ""},        // the vote again at its own revision: still not of r3
			{memberAt("b", "r3", 7), ""},         // the current announcement again: the same
			{voteAt("b", "r3", U, 8), "Unreachable"},
		}},
		{"a node's removal is not undone by its older announcement", Any, []step{
			{memberAt("a", "r2", 1), ""}, {memberAt("b", "r1", 2), ""}, {memberAt("c", "r1", 3), ""},
			{voteAt("a", "r2", R, 1), ""}, {voteAt("c", "r1", R, 2), ""}, {voteAt("b", "r1", U, 3), "Unreachable"},
			{memberAt("b", "-", 9), "Reachable"}, // b's membership lapsed: its marker
			{memberAt("b", "r1", 2), ""},         // the put before it, from a stale replica
		}},
		{"a replaced vote is not undone by its older entry", Any, []step{
			{memberAt("a", "r2", 1), ""}, {memberAt("b", "r1", 2), ""}, {memberAt("c", "r1", 3), ""},
			{voteAt("a", "r2", R, 1), ""}, {voteAt("c", "r1", R, 2), ""}, {voteAt("b", "r1", U, 3), "Unreachable"},
			{voteAt("b", "r1", R, 6), "Reachable"},
			{voteAt("b", "r1", U, 3), ""}, // the vote before it, from a stale replica
		}},
		{"a removed record is not undone by its older entry", Majority, []step{
			{memberIn("a", "r2"), ""}, {memberIn("b", "r1"), ""}, {memberIn("c", "r1"), ""},
			{seedIn(), ""}, {recordAt(U, 5), ""},
			{voteAt("b", "r1", U, 1), ""}, {voteAt("c", "r1", R, 2), ""}, // a split: nothing decided
			{recordAt(qualify.NonQualified, 9), ""}, // the record removed
			{recordAt(U, 5), ""},                    // the record before it, from a stale replica
			{leadIn(), ""},                          // nothing recorded to adopt
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}
			l := newLedger("a", "r2", nodes, tt.q, 3)
			for i, s := range tt.steps {
				o := s.in(l)
				if got := brief(o); got != s.want {
					t.Fatalf("step %d: %q, want %q", i, got, s.want)
				}
				l.take(true) // the publisher takes every write
			}
		})
	}
}

// TestLedgerSeedsFromTheLatestRecord: a restarted node's watch of the
// verdicts may run on its own server, whose replica still holds the
// record of before its stop (Unreachable) until it has caught up; the
// newer record (Reachable) that follows before the seed ends replaces
// it. Its previous run's vote and its silence then keep Reachable: with
// quorum=any the seed is what the contact keeps until every vantage
// says Reachable.
func TestLedgerSeedsFromTheLatestRecord(t *testing.T) {
	l := newLedger("a", "r2", []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}, Any, 3)
	for _, s := range []in{memberIn("a", "r2"), memberIn("b", "r1"), memberIn("c", "r1"),
		recordIn(U), recordIn(R), seedIn(),
		voteIn("b", "r1", R), voteIn("c", "r1", R), voteIn("a", "r1", U)} {
		s(l)
	}
	if s := l.status("k"); s != R {
		t.Fatalf("the restarted node says %v, seeded from the record the newer one replaced", s)
	}
	recordIn(U)(l) // after the seed a record seeds nothing: the votes decide
	if s := l.status("k"); s != R {
		t.Fatalf("a record after the seed set the status to %v", s)
	}
}

// TestLedgerCountsOlderEntries: an entry older than its key's last
// applied is counted as it is dropped; the same revision again is
// applied, not counted.
func TestLedgerCountsOlderEntries(t *testing.T) {
	l := newLedger("a", "r2", []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}, Any, 3)
	for _, s := range []in{memberAt("b", "r3", 7), memberAt("b", "r3", 7), memberAt("b", "r1", 5),
		voteAt("b", "r3", qualify.Reachable, 4), voteAt("b", "r1", qualify.Unreachable, 3)} {
		s(l)
	}
	if l.older != 2 {
		t.Fatalf("%d entries counted as older, want 2", l.older)
	}
	if m := l.members["b"]; !m.Up || m.run != "r3" {
		t.Fatalf("b is %+v, want up in run r3", m)
	}
}

// BenchmarkLedgerHeap reports the live heap a ledger holds per contact
// once three nodes have voted on each of 10,000 contacts and its verdict
// is recorded (B/contact): the tally, the records and their revisions.
func BenchmarkLedgerHeap(b *testing.B) {
	const contacts = 10000
	nodes := []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	names := make([]string, contacts)
	for i := range names {
		names[i] = fmt.Sprintf("sip:aor%06d@192.0.2.%d:5060", i, i%250)
	}
	var per float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := newLedger("a", "r1", nodes, Majority, 3)
		rev := uint64(0)
		for _, n := range nodes {
			rev++
			l.member(n.Name, announcement{Run: "r1"}, false, rev, time.Time{})
		}
		for _, c := range names {
			for _, n := range nodes {
				rev++
				l.vote(c, n.Name, "r1", qualify.Reachable, rev, time.Time{})
			}
			rev++
			l.record(c, qualify.Reachable, rev)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(after.HeapAlloc-before.HeapAlloc) / contacts
		runtime.KeepAlive(l)
	}
	b.ReportMetric(per, "B/contact")
}
