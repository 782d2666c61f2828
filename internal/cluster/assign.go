package cluster

import (
	"cmp"
	"slices"
)

// Assign returns the n nodes that probe the contact key, of the live nodes
// (at most len(nodes)), highest weight first, by rendezvous (highest
// random weight) hashing: every node weighs every key, the n heaviest
// probe it. It is a pure function of its arguments, the same on every
// node, and stable: a node leaving moves only the keys it probed, each to
// the node next in its order, and a node joining takes only keys it now
// outweighs. Ties (equal weights) go to the smaller name.
func Assign(key string, nodes []string, n int) []string {
	type weighed struct {
		name string
		w    uint64
	}
	ws := make([]weighed, len(nodes))
	for i, name := range nodes {
		ws[i] = weighed{name, weight(name, key)}
	}
	slices.SortFunc(ws, func(a, b weighed) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	out := make([]string, min(max(n, 0), len(ws)))
	for i := range out {
		out[i] = ws[i].name
	}
	return out
}

// Probes reports whether self is one of Assign(key, nodes, n), without
// allocating: whether fewer than n live nodes outweigh it. self need not
// be live; a node that is not live probes nothing.
func Probes(key string, nodes []string, n int, self string) bool {
	mine, live := weight(self, key), false
	heavier := 0
	for _, name := range nodes {
		if name == self {
			live = true
			continue
		}
		w := weight(name, key)
		if w > mine || (w == mine && name < self) {
			heavier++
		}
	}
	return live && heavier < n
}

// weight is a node's weight for a key: FNV-1a over name, a zero byte and
// key, then the SplitMix64 finaliser, so that weights of near names are
// independent. It is fixed forever: every node of every version must
// weigh alike, or two versions assign differently during an upgrade.
func weight(name, key string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	h *= prime // the zero byte between name and key
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}
