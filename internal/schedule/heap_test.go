package schedule

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQueueMatchesSortedModel drives random sets, moves and removes and
// checks pops against a plain map sorted by (due, id).
func TestQueueMatchesSortedModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var q queue
	model := map[ID]int64{}
	for step := range 20000 {
		id := ID(r.IntN(300))
		switch r.IntN(5) {
		case 0, 1, 2:
			d := int64(r.IntN(1000))
			q.set(id, d)
			model[id] = d
		case 3:
			_, had := model[id]
			if q.remove(id) != had {
				t.Fatalf("step %d: remove(%d) disagrees with model", step, id)
			}
			delete(model, id)
		case 4:
			if q.len() == 0 {
				continue
			}
			e := q.pop()
			if want := minOf(model); e.due != want {
				t.Fatalf("step %d: pop due %d, want %d", step, e.due, want)
			}
			if model[e.id] != e.due {
				t.Fatalf("step %d: popped %d with due %d, model has %d", step, e.id, e.due, model[e.id])
			}
			delete(model, e.id)
		}
		if q.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", step, q.len(), len(model))
		}
	}
	checkDrain(t, &q, model)
}

func minOf(m map[ID]int64) int64 {
	first := true
	var best int64
	for _, d := range m {
		if first || d < best {
			best, first = d, false
		}
	}
	return best
}

func checkDrain(t *testing.T, q *queue, model map[ID]int64) {
	t.Helper()
	var want []int64
	for _, d := range model {
		want = append(want, d)
	}
	slices.Sort(want)
	for i, w := range want {
		if e := q.pop(); e.due != w {
			t.Fatalf("drain %d: due %d, want %d", i, e.due, w)
		}
	}
	if q.len() != 0 {
		t.Fatalf("queue not empty after drain")
	}
}

func BenchmarkQueueSetPop1M(b *testing.B) {
	var q queue
	r := rand.New(rand.NewPCG(1, 1))
	const n = 1_000_000
	for i := range n {
		q.set(ID(i), int64(r.IntN(60e9)))
	}
	b.ReportAllocs()
	for b.Loop() {
		e := q.pop()
		q.set(e.id, e.due+60e9)
	}
}

// TestQueueReserve: after reserve(n), adding IDs below n allocates nothing.
func TestQueueReserve(t *testing.T) {
	var q queue
	q.reserve(1000)
	id := ID(0)
	allocs := testing.AllocsPerRun(999, func() {
		q.set(id, int64(1000-id))
		id++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per insert after reserve", allocs)
	}
	if q.len() != 1000 || q.min().id != 999 {
		t.Fatalf("queue of %d, min %d after the inserts", q.len(), q.min().id)
	}
}
