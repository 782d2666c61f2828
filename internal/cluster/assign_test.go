package cluster

import (
	"fmt"
	"slices"
	"testing"
)

// contacts returns n contact keys shaped as the daemon's (AoR/URI).
func contacts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("trunk%d/sip:10.0.%d.%d:5060", i, i/256, i%256)
	}
	return out
}

func TestAssignPicksVantages(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e"}
	for _, key := range contacts(200) {
		got := Assign(key, nodes, 3)
		if len(got) != 3 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 3 {
			t.Fatalf("%s: %v, want 3 distinct nodes", key, got)
		}
		if !slices.Equal(Assign(key, []string{"e", "d", "c", "b", "a"}, 3), got) {
			t.Fatalf("%s: the order of the nodes changed the assignment", key)
		}
		for _, n := range nodes {
			if Probes(key, nodes, 3, n) != slices.Contains(got, n) {
				t.Fatalf("%s: Probes(%s) disagrees with Assign %v", key, n, got)
			}
		}
	}
	if got := Assign("x", nodes[:2], 3); len(got) != 2 {
		t.Errorf("more vantages than nodes: %v", got)
	}
	if Probes("x", nodes[:2], 3, "z") {
		t.Errorf("a node that is not live probes")
	}
}

// TestAssignStable checks that a node leaving moves only the contacts it
// probed, and a node joining takes only contacts it now probes: every
// other contact keeps its vantages.
func TestAssignStable(t *testing.T) {
	tests := []struct {
		name          string
		before, after []string
		moved         string // the node that left or joined
		vantages      int
	}{
		{"c leaves 3->2, vantages 1", []string{"a", "b", "c"}, []string{"a", "b"}, "c", 1},
		{"c leaves 5->4, vantages 2", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "d", "e"}, "c", 2},
		{"f joins 5->6, vantages 3", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c", "d", "e", "f"}, "f", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moved, share := 0, 0
			keys := contacts(3000)
			for _, key := range keys {
				was, now := Assign(key, tt.before, tt.vantages), Assign(key, tt.after, tt.vantages)
				involved := slices.Contains(was, tt.moved) || slices.Contains(now, tt.moved)
				if involved {
					share++
				}
				if !slices.Equal(was, now) {
					moved++
					if !involved {
						t.Fatalf("%s: %v -> %v moved without %s", key, was, now, tt.moved)
					}
				}
			}
			// The node's share is about vantages/nodes of the contacts.
			n := max(len(tt.before), len(tt.after))
			want := len(keys) * tt.vantages / n
			if share < want*8/10 || share > want*12/10 {
				t.Errorf("%s's share %d of %d contacts, want about %d", tt.moved, share, len(keys), want)
			}
			t.Logf("%d of %d contacts changed vantages, %s's share %d", moved, len(keys), tt.moved, share)
		})
	}
}

func TestAssignSpread(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	count := map[string]int{}
	keys := contacts(3000)
	for _, key := range keys {
		count[Assign(key, nodes, 1)[0]]++
	}
	for _, n := range nodes {
		if c := count[n]; c < 900 || c > 1100 {
			t.Errorf("%s probes %d of %d contacts, want about 1000", n, c, len(keys))
		}
	}
}

func BenchmarkProbes(b *testing.B) {
	nodes := []string{"a", "b", "c", "d", "e"}
	keys := contacts(1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Probes(keys[i%len(keys)], nodes, 3, "c")
	}
}
