package cluster

import (
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
// live nodes, the cluster's status of each contact and the status the
// verdicts bucket holds of it. Each method returns the changes it
// causes. The Cluster holds its lock around it.
//
// A contact costs one map slot, its key once and a byte per node that
// ever voted: the votes are indexed by the node's place in nodes, not
// keyed by its name.
type tally struct {
	q        Quorum
	vantages int
	live     []string // sorted
	nodes    []string // every node that voted, in the order first seen: an index of entry.votes
	contacts map[string]entry
}

// entry is one contact's part of the tally.
type entry struct {
	votes    []qualify.Status // by index in tally.nodes; NonQualified for none
	status   qualify.Status   // the cluster's; NonQualified until decided or seeded
	recorded qualify.Status   // the verdicts bucket's, as last seen
}

// newTally returns an empty tally.
func newTally(q Quorum, vantages int) *tally {
	return &tally{q: q, vantages: vantages, contacts: map[string]entry{}}
}

// status is the cluster's status of contact (NonQualified for none).
func (t *tally) status(contact string) qualify.Status { return t.contacts[contact].status }

// seed sets the cluster's status of contact as the cluster last recorded
// it, unless this node has already decided one: the status a contact
// keeps while its vantages disagree.
func (t *tally) seed(contact string, s qualify.Status) {
	if e := t.contacts[contact]; e.status == qualify.NonQualified {
		e.status = s
		t.contacts[contact] = e
	}
}

// record notes the status the verdicts bucket holds of contact.
func (t *tally) record(contact string, s qualify.Status) {
	e := t.contacts[contact]
	e.recorded = s
	t.contacts[contact] = e
}

// recorded is the status the verdicts bucket holds of contact, as last
// seen.
func (t *tally) recorded(contact string) qualify.Status { return t.contacts[contact].recorded }

// unrecorded calls f with each contact whose status the verdicts bucket
// does not hold (none for a contact without a status).
func (t *tally) unrecorded(f func(contact string, s qualify.Status)) {
	for contact, e := range t.contacts {
		if e.status != qualify.NonQualified && e.recorded != e.status {
			f(contact, e.status)
		}
	}
}

// vote records node's status of contact; NonQualified and Removed remove
// the vote.
func (t *tally) vote(contact, node string, s qualify.Status) (Verdict, bool) {
	if s != qualify.Reachable && s != qualify.Unreachable {
		s = qualify.NonQualified
	}
	e, i := t.contacts[contact], t.index(node)
	if i >= len(e.votes) {
		if s == qualify.NonQualified {
			return Verdict{}, false // no vote to remove
		}
		e.votes = slices.Grow(e.votes, len(t.nodes)-len(e.votes))[:len(t.nodes)]
	}
	e.votes[i] = s
	t.contacts[contact] = e
	return t.decide(contact)
}

// index is node's place in t.nodes, appending a node not seen before.
func (t *tally) index(node string) int {
	if i := slices.Index(t.nodes, node); i >= 0 {
		return i
	}
	t.nodes = append(t.nodes, node)
	return len(t.nodes) - 1
}

// voteOf is node's vote on contact (NonQualified for none).
func (t *tally) voteOf(contact, node string) qualify.Status {
	votes := t.contacts[contact].votes
	if i := slices.Index(t.nodes, node); i >= 0 && i < len(votes) {
		return votes[i]
	}
	return qualify.NonQualified
}

// members replaces the live nodes and returns the contacts whose status
// that changes.
func (t *tally) members(live []string) []Verdict {
	t.live = slices.Sorted(slices.Values(live))
	var out []Verdict
	for contact, e := range t.contacts {
		if len(e.votes) == 0 {
			continue // no vote: the status stays
		}
		if v, ok := t.decide(contact); ok {
			out = append(out, v)
		}
	}
	return out
}

// decide applies the quorum rule to contact's live vantages.
func (t *tally) decide(contact string) (Verdict, bool) {
	e := t.contacts[contact]
	v := Verdict{Contact: contact, From: e.status, Votes: t.ballot(contact)}
	votes := make([]qualify.Status, len(v.Votes))
	for i, b := range v.Votes {
		votes[i] = b.Status
	}
	v.Status = t.q.Decide(len(votes), votes, v.From)
	if v.Status == v.From {
		return v, false
	}
	e.status = v.Status
	t.contacts[contact] = e
	return v, true
}

// ballot is the votes of contact's live vantages, in assignment order.
func (t *tally) ballot(contact string) []Vote {
	nodes := Assign(contact, t.live, t.vantages)
	out := make([]Vote, len(nodes))
	for i, n := range nodes {
		out[i] = Vote{n, t.voteOf(contact, n)}
	}
	return out
}
