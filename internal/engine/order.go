package engine

import (
	"slices"
	"strings"
)

// sorted returns the AoRs of states, a new set, ordered by name, and sets
// each one's rank to its index there. Apply calls it before it locks the
// engine, so a listing finds the AoRs in order instead of sorting a
// million names with the engine locked (1 s that no probe could start:
// `go test -bench Contacts1M ./internal/engine`). An AoR that the old set
// defined too takes its place from its old rank; only the new names are
// sorted and merged in, so the usual reload, which changes no name, sorts
// nothing. It reads the old order and ranks without mu: only Apply
// changes them, and the caller holds applyMu.
func (e *Engine) sorted(states []aorState, p *reloadPlan) []*aorState {
	kept := e.spare[:0] // by old rank; nil: gone
	if cap(kept) < len(e.order) {
		kept = make([]*aorState, len(e.order))
	}
	kept = kept[:len(e.order)]
	var fresh []*aorState
	for i := range states {
		if old := p.old(i); old != nil {
			kept[old.rank] = &states[i]
		} else {
			fresh = append(fresh, &states[i])
		}
	}
	kept = slices.DeleteFunc(kept, func(a *aorState) bool { return a == nil })
	slices.SortFunc(fresh, byName)
	out := merge(kept, fresh)
	for i, a := range out {
		a.rank = int32(i)
	}
	return out
}

func byName(x, y *aorState) int { return strings.Compare(x.name, y.name) }

// merge returns the AoRs of x and y, both sorted by name, in one list
// sorted by name. It returns x itself when y is empty.
func merge(x, y []*aorState) []*aorState {
	if len(y) == 0 {
		return x
	}
	out := make([]*aorState, 0, len(x)+len(y))
	for len(x) > 0 && len(y) > 0 {
		if byName(x[0], y[0]) < 0 {
			out, x = append(out, x[0]), x[1:]
		} else {
			out, y = append(out, y[0]), y[1:]
		}
	}
	return append(append(out, x...), y...)
}
