package cluster

import (
	"testing"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

const (
	R = qualify.Reachable
	U = qualify.Unreachable
	N = qualify.NonQualified
)

func TestQuorumDecide(t *testing.T) {
	tests := []struct {
		q     Quorum
		n     int
		votes []qualify.Status
		prev  qualify.Status
		want  qualify.Status
	}{
		// majority of 3: two decide either way; one of each keeps prev.
		{Majority, 3, []qualify.Status{U}, R, R},
		{Majority, 3, []qualify.Status{U, U}, R, U},
		{Majority, 3, []qualify.Status{U, R}, R, R},
		{Majority, 3, []qualify.Status{U, R}, U, U},
		{Majority, 3, []qualify.Status{U, R, N}, U, U},
		{Majority, 3, []qualify.Status{R, R, U}, U, R},
		{Majority, 3, []qualify.Status{}, N, N},
		{Majority, 3, []qualify.Status{R, R}, N, R},
		// majority of 2: both to take down, both to bring up; a split
		// keeps the status either way.
		{Majority, 2, []qualify.Status{U, R}, U, U},
		{Majority, 2, []qualify.Status{U, R}, R, R},
		{Majority, 2, []qualify.Status{R, R}, U, R},
		{Majority, 2, []qualify.Status{U, U}, R, U},
		// majority of 4: three either way; two against two keeps it.
		{Majority, 4, []qualify.Status{U, U, R, R}, U, U},
		{Majority, 4, []qualify.Status{U, U, R, R}, R, R},
		{Majority, 4, []qualify.Status{U, R, R, R}, U, R},
		{Majority, 1, []qualify.Status{U}, R, U},
		// all: every vantage to take down; one Reachable brings it up.
		{All, 3, []qualify.Status{U, U}, R, R},
		{All, 3, []qualify.Status{U, U, N}, R, R},
		{All, 3, []qualify.Status{U, U, U}, R, U},
		{All, 3, []qualify.Status{U, U, R}, U, R},
		{All, 3, []qualify.Status{U, U}, U, U},
		// any: one vantage takes down; every vantage to bring up.
		{Any, 3, []qualify.Status{U}, R, U},
		{Any, 3, []qualify.Status{U, R, R}, R, U},
		{Any, 3, []qualify.Status{R, R}, U, U},
		{Any, 3, []qualify.Status{R, R, R}, U, R},
		// no live vantage: nothing to decide on.
		{Any, 0, nil, U, U},
		{All, 0, nil, R, R},
	}
	for _, tt := range tests {
		got := tt.q.Decide(tt.n, tt.votes, tt.prev)
		if got != tt.want {
			t.Errorf("%v of %d, votes %v, prev %v: %v, want %v", tt.q, tt.n, tt.votes, tt.prev, got, tt.want)
		}
	}
}

// TestQuorumNeverBoth checks, for every split of up to 5 vantages, that
// the two conditions of Decide never hold at once (the result never
// depends on prev when either holds), and that Majority is symmetric:
// the votes swapped give the status swapped.
func TestQuorumNeverBoth(t *testing.T) {
	for _, q := range []Quorum{Majority, All, Any} {
		for n := 1; n <= 5; n++ {
			for up := 0; up <= n; up++ {
				for down := 0; up+down <= n; down++ {
					votes := append(repeat(R, up), repeat(U, down)...)
					a, b := q.Decide(n, votes, R), q.Decide(n, votes, U)
					decided := down >= q.Need(n) || up >= q.NeedUp(n)
					if decided != (a == b) {
						t.Errorf("%v n=%d up=%d down=%d: from R %v, from U %v", q, n, up, down, a, b)
					}
					if q.Need(n)+q.NeedUp(n) <= n {
						t.Errorf("%v n=%d: Need %d + NeedUp %d <= n: both could hold", q, n, q.Need(n), q.NeedUp(n))
					}
					swapped := append(repeat(U, up), repeat(R, down)...)
					if s := q.Decide(n, swapped, U); q == Majority && a == b && s != flip(a) {
						t.Errorf("majority n=%d up=%d down=%d: %v, swapped %v", n, up, down, a, s)
					}
				}
			}
		}
	}
}

// flip swaps Reachable and Unreachable.
func flip(s qualify.Status) qualify.Status {
	if s == R {
		return U
	}
	return R
}

// repeat returns n copies of s.
func repeat(s qualify.Status, n int) []qualify.Status {
	out := make([]qualify.Status, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestParseQuorum(t *testing.T) {
	for _, q := range []Quorum{Majority, All, Any} {
		got, err := ParseQuorum(q.String())
		if err != nil || got != q {
			t.Errorf("ParseQuorum(%q) = %v, %v", q.String(), got, err)
		}
	}
}
