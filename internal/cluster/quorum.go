package cluster

import (
	"fmt"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Quorum is how many of a contact's live vantages must say Unreachable
// before the cluster does. The zero value is Majority.
type Quorum uint8

const (
	// Majority: more than half of the live vantages.
	Majority Quorum = iota
	// All: every live vantage.
	All
	// Any: one live vantage.
	Any
)

var quorumLabels = [...]string{"majority", "all", "any"}

// String returns the option's value: majority, all or any.
func (q Quorum) String() string {
	if int(q) < len(quorumLabels) {
		return quorumLabels[q]
	}
	return fmt.Sprintf("Quorum(%d)", uint8(q))
}

// ParseQuorum reads quorum=.
func ParseQuorum(v string) (Quorum, error) {
	for i, l := range quorumLabels {
		if l == v {
			return Quorum(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q: want majority, all or any", ErrValue, v)
}

// Need is how many of n live vantages must say Unreachable: n/2+1 for
// Majority, n for All, 1 for Any (and 1 when n is 0, which no vote meets).
func (q Quorum) Need(n int) int {
	switch {
	case n == 0:
		return 1
	case q == All:
		return n
	case q == Any:
		return 1
	}
	return n/2 + 1
}

// NeedUp is how many of n live vantages must say Reachable before the
// cluster does: more than half for Majority, as for Unreachable (with an
// even n a split keeps the status: one vantage of two whose vote of a new
// outage is still in transit must not bring a dead trunk up), and
// otherwise as many as leave the quorum of Unreachable out of reach: one
// for All, every vantage for Any (1 when n is 0, which no vote meets).
func (q Quorum) NeedUp(n int) int {
	if n == 0 || q == Majority {
		return q.Need(n)
	}
	return n - q.Need(n) + 1
}

// Decide is the cluster's status of one contact from the statuses of its
// n live vantages (votes holds those that have one; Reachable and
// Unreachable count, any other status abstains) and the cluster's
// previous status. It is Unreachable when Need(n) say Unreachable,
// Reachable when NeedUp(n) say Reachable, otherwise prev. The two
// conditions never hold at once (Need(n)+NeedUp(n) > n), so the order of
// the votes never matters; a vantage whose own network fails can never
// alone hold a contact down under All, nor alone bring it up under Any,
// and under Majority neither half of an even split decides.
func (q Quorum) Decide(n int, votes []qualify.Status, prev qualify.Status) qualify.Status {
	up, down := 0, 0
	for _, v := range votes {
		switch v {
		case qualify.Reachable:
			up++
		case qualify.Unreachable:
			down++
		}
	}
	switch {
	case n > 0 && down >= q.Need(n):
		return qualify.Unreachable
	case n > 0 && up >= q.NeedUp(n):
		return qualify.Reachable
	}
	return prev
}
