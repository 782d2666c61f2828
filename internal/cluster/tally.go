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
}

// Verdict is a change of the cluster's status of a contact, with the
// votes of its live vantages that decided it.
type Verdict struct {
	// Contact is the contact's key, as the daemon reported it.
	Contact string
	// Status is the cluster's new status, From its previous one.
	Status, From qualify.Status
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
}

// newTally returns an empty tally.
func newTally(q Quorum, vantages int) *tally {
	return &tally{q: q, vantages: vantages, runs: map[string]string{},
		votes: map[string]map[string]mark{}, status: map[string]qualify.Status{}}
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
	v := Verdict{Contact: contact, Status: s, From: from, Votes: t.ballot(contact)}
	votes := statuses(v.Votes)
	if t.q.Decide(len(votes), votes, s) != s || t.q.Decide(len(votes), votes, from) != from {
		return Verdict{}, false
	}
	t.status[contact] = s
	return v, true
}

// vote records node's status of contact, cast in no run (a node that
// announces none); see voteIn.
func (t *tally) vote(contact, node string, s qualify.Status) (Verdict, bool) {
	return t.voteIn(contact, node, "", s)
}

// voteIn records node's status of contact, cast in node's run run;
// NonQualified and Removed remove the vote.
func (t *tally) voteIn(contact, node, run string, s qualify.Status) (Verdict, bool) {
	vs := t.votes[contact]
	if s == qualify.Reachable || s == qualify.Unreachable {
		if vs == nil {
			vs = map[string]mark{}
			t.votes[contact] = vs
		}
		vs[node] = mark{s, run}
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
	delete(t.status, contact)
	return Verdict{Contact: contact, Status: qualify.NonQualified, From: from, Votes: t.ballot(contact)}, from != qualify.NonQualified
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

// counted is node's vote of contact as it counts: NonQualified for none,
// or for a vote of another run than node's.
func (t *tally) counted(contact, node string) qualify.Status {
	m, ok := t.votes[contact][node]
	if !ok || m.run != t.runs[node] {
		return qualify.NonQualified
	}
	return m.status
}

// decide applies the quorum rule to contact's live vantages.
func (t *tally) decide(contact string) (Verdict, bool) {
	v := Verdict{Contact: contact, From: t.status[contact], Votes: t.ballot(contact)}
	votes := statuses(v.Votes)
	v.Status = t.q.Decide(len(votes), votes, v.From)
	if v.Status == v.From {
		return v, false
	}
	t.status[contact] = v.Status
	return v, true
}

// ballot is the votes of contact's live vantages, in assignment order.
func (t *tally) ballot(contact string) []Vote {
	nodes := Assign(contact, t.live, t.vantages)
	out := make([]Vote, len(nodes))
	for i, n := range nodes {
		out[i] = Vote{n, t.counted(contact, n)}
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
