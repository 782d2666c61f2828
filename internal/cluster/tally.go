package cluster

import (
	"maps"
	"slices"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Vote is one vantage's status of a contact; NonQualified when it has
// published none.
type Vote struct {
	Node   string
	Status qualify.Status
	// Draining: the vantage's peer asked it for a pause (a 503 with
	// Retry-After, qualify-semantics §11.4) that has not ended.
	Draining bool
}

// Verdict is a change of the cluster's status of a contact, with the
// votes of its live vantages that decided it.
type Verdict struct {
	// Contact is the contact's key, as the daemon reported it.
	Contact string
	// Status is the cluster's new status, From its previous one.
	Status, From qualify.Status
	// Draining is whether the cluster now holds the contact out of
	// routing as draining, WasDraining whether it did: a verdict may
	// change that alone.
	Draining, WasDraining bool
	// Votes are the contact's live vantages, in assignment order.
	Votes []Vote
}

// tally is the cluster's verdicts, pure: the votes of every node, the
// live nodes with the run each announced, and the cluster's status of
// each contact. Each method returns the changes it causes. The Cluster
// holds its lock around it.
type tally struct {
	q        Quorum
	vantages int
	live     []string          // sorted
	runs     map[string]string // each member's run as it announced it
	votes    map[string]map[string]mark
	status   map[string]qualify.Status
	draining map[string]bool // the contacts held out as draining
}

// mark is one vote as the votes bucket holds it: the status and the run
// of the voter that cast it. It counts only while the voter's announced
// run is the same: a node that restarts starts a new run, and the votes
// of its previous one, still in the bucket until it withdraws them,
// never count again (docs/cluster.md: a restarted node takes its
// verdicts back, it does not replay its old ones).
type mark struct {
	status qualify.Status
	run    string
	drain  bool
	rev    uint64 // the entry's KV revision (ledger.newerLocked)
}

// newTally returns an empty tally.
func newTally(q Quorum, vantages int) *tally {
	return &tally{q: q, vantages: vantages, runs: map[string]string{},
		votes: map[string]map[string]mark{}, status: map[string]qualify.Status{}, draining: map[string]bool{}}
}

// seed sets the cluster's status of contact as the cluster last recorded
// it, unless this node has already decided one: the status a contact
// keeps while its vantages disagree.
func (t *tally) seed(contact string, s qualify.Status) {
	if _, ok := t.status[contact]; !ok {
		t.status[contact] = s
	}
}

// adopt sets contact's status to s, the recorded verdict, when its live
// vantages' votes would keep s as well as the status it has now (they
// decide nothing on their own), and returns the change.
func (t *tally) adopt(contact string, s qualify.Status) (Verdict, bool) {
	from := t.status[contact]
	if from == s || (s != qualify.Reachable && s != qualify.Unreachable) {
		return Verdict{}, false
	}
	v := Verdict{Contact: contact, Status: s, From: from, WasDraining: t.draining[contact], Votes: t.ballot(contact)}
	votes := statuses(v.Votes)
	if t.q.Decide(len(votes), votes, s) != s || t.q.Decide(len(votes), votes, from) != from {
		return Verdict{}, false
	}
	t.status[contact] = s
	v.Draining = v.WasDraining && s == qualify.Reachable
	if !v.Draining {
		delete(t.draining, contact)
	}
	return v, true
}

// vote records node's status of contact, cast in no run (a node that
// announces none); see voteIn.
func (t *tally) vote(contact, node string, s qualify.Status) (Verdict, bool) {
	return t.voteIn(contact, node, mark{status: s})
}

// voteIn records node's vote m of contact; a status other than
// Reachable and Unreachable removes the vote.
func (t *tally) voteIn(contact, node string, m mark) (Verdict, bool) {
	vs := t.votes[contact]
	if s := m.status; s == qualify.Reachable || s == qualify.Unreachable {
		if vs == nil {
			vs = map[string]mark{}
			t.votes[contact] = vs
		}
		vs[node] = m
	} else {
		delete(vs, node)
	}
	v, changed := t.decide(contact)
	if len(vs) == 0 {
		delete(t.votes, contact)
	}
	return v, changed
}

// forget removes the cluster's status of contact if no vote holds it,
// and returns the change.
func (t *tally) forget(contact string) (Verdict, bool) {
	from, ok := t.status[contact]
	if !ok || len(t.votes[contact]) > 0 {
		return Verdict{}, false
	}
	was := t.draining[contact]
	delete(t.status, contact)
	delete(t.draining, contact)
	return Verdict{Contact: contact, Status: qualify.NonQualified, From: from, WasDraining: was, Votes: t.ballot(contact)}, from != qualify.NonQualified
}

// members replaces the live nodes and returns the contacts whose status
// that changes.
func (t *tally) members(live []string) []Verdict {
	t.live = slices.Sorted(slices.Values(live))
	var out []Verdict
	for contact := range t.votes {
		if v, ok := t.decide(contact); ok {
			out = append(out, v)
		}
	}
	return out
}

// incarnate sets the runs the members announced and returns the
// contacts whose status that changes: a node's votes count only while
// the run they were cast in is the one it announces.
func (t *tally) incarnate(runs map[string]string) []Verdict {
	if maps.Equal(t.runs, runs) {
		return nil
	}
	t.runs = runs
	var out []Verdict
	for contact := range t.votes {
		if v, ok := t.decide(contact); ok {
			out = append(out, v)
		}
	}
	return out
}

// counted is node's vote of contact as it counts: none (NonQualified)
// for no vote, or for a vote of another run than node's.
func (t *tally) counted(contact, node string) Vote {
	m, ok := t.votes[contact][node]
	if !ok || m.run != t.runs[node] {
		return Vote{Node: node}
	}
	return Vote{Node: node, Status: m.status, Draining: m.drain}
}

// decide applies the quorum rule to contact's live vantages, and the
// drain's: a Reachable contact drains while one live vantage says its
// peer asked it for a pause (the peer's own word, not a view of the
// network, so one vantage suffices; qualify-semantics §11.4).
func (t *tally) decide(contact string) (Verdict, bool) {
	v := Verdict{Contact: contact, From: t.status[contact], WasDraining: t.draining[contact], Votes: t.ballot(contact)}
	votes := statuses(v.Votes)
	v.Status = t.q.Decide(len(votes), votes, v.From)
	v.Draining = v.Status == qualify.Reachable && slices.ContainsFunc(v.Votes, func(b Vote) bool { return b.Draining })
	if v.Status == v.From && v.Draining == v.WasDraining {
		return v, false
	}
	t.status[contact] = v.Status
	if v.Draining {
		t.draining[contact] = true
	} else {
		delete(t.draining, contact)
	}
	return v, true
}

// ballot is the votes of contact's live vantages, in assignment order.
func (t *tally) ballot(contact string) []Vote {
	nodes := Assign(contact, t.live, t.vantages)
	out := make([]Vote, len(nodes))
	for i, n := range nodes {
		out[i] = t.counted(contact, n)
	}
	return out
}

// statuses are the votes' statuses, in order.
func statuses(votes []Vote) []qualify.Status {
	out := make([]qualify.Status, len(votes))
	for i, b := range votes {
		out[i] = b.Status
	}
	return out
}
