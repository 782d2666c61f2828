package schedule

import "slices"

// ID identifies one item. IDs should be dense (slot numbers): the heap keeps
// a position table indexed by ID.
type ID = uint32

// entry is one waiting item: its due time in nanoseconds since the
// scheduler's epoch.
type entry struct {
	due int64
	id  ID
}

// queue is an indexed 4-ary min-heap ordered by due time. A 4-ary heap is
// shallower than a binary one (10 levels for a million items) and its
// children share cache lines. Not safe for concurrent use.
type queue struct {
	items []entry
	pos   []int32 // pos[id] is the index of id in items, or a state below
}

// States of an item that is not in the heap, kept in queue.pos.
const (
	idle      = -1 // not scheduled
	running   = -2 // its job runs; it returns to the heap when the job ends
	cancelled = -3 // its job runs, but it was removed meanwhile
)

const arity = 4

func (q *queue) len() int { return len(q.items) }

// min returns the earliest entry; the queue must not be empty.
func (q *queue) min() entry { return q.items[0] }

// has reports whether id is waiting.
func (q *queue) has(id ID) bool { return int(id) < len(q.pos) && q.pos[id] >= 0 }

// state returns id's position in the heap, or its state when not there.
func (q *queue) state(id ID) int32 {
	if int(id) >= len(q.pos) {
		return idle
	}
	return q.pos[id]
}

// mark records the state of an item that is not in the heap.
func (q *queue) mark(id ID, state int32) {
	q.grow(id)
	q.pos[id] = state
}

// due returns id's due time, if it is waiting.
func (q *queue) due(id ID) (int64, bool) {
	if !q.has(id) {
		return 0, false
	}
	return q.items[q.pos[id]].due, true
}

// set inserts id or moves it to a new due time.
func (q *queue) set(id ID, due int64) {
	if q.has(id) {
		i := int(q.pos[id])
		old := q.items[i].due
		q.items[i].due = due
		if due < old {
			q.up(i)
		} else {
			q.down(i)
		}
		return
	}
	q.grow(id)
	q.items = append(q.items, entry{due: due, id: id})
	q.pos[id] = int32(len(q.items) - 1)
	q.up(len(q.items) - 1)
}

// grow extends the position table to cover id.
func (q *queue) grow(id ID) {
	for int(id) >= len(q.pos) {
		q.pos = append(q.pos, idle)
	}
}

// reserve sizes the queue and the position table for IDs below n.
func (q *queue) reserve(n int) {
	if n > cap(q.items) {
		q.items = slices.Grow(q.items, n-len(q.items))
	}
	if n > len(q.pos) {
		q.pos = slices.Grow(q.pos, n-len(q.pos))
	}
}

// remove deletes id and reports whether it was waiting.
func (q *queue) remove(id ID) bool {
	if !q.has(id) {
		return false
	}
	i := int(q.pos[id])
	q.pos[id] = idle
	last := len(q.items) - 1
	if i != last {
		q.items[i] = q.items[last]
		q.pos[q.items[i].id] = int32(i)
	}
	q.items = q.items[:last]
	if i < last {
		q.down(i)
		q.up(i)
	}
	return true
}

// pop removes and returns the earliest entry; the queue must not be empty.
func (q *queue) pop() entry {
	e := q.items[0]
	q.remove(e.id)
	return e
}

func (q *queue) up(i int) {
	e := q.items[i]
	for i > 0 {
		p := (i - 1) / arity
		if q.items[p].due <= e.due {
			break
		}
		q.place(i, q.items[p])
		i = p
	}
	q.place(i, e)
}

func (q *queue) down(i int) {
	e := q.items[i]
	n := len(q.items)
	for {
		c := q.smallestChild(i, n)
		if c < 0 || q.items[c].due >= e.due {
			break
		}
		q.place(i, q.items[c])
		i = c
	}
	q.place(i, e)
}

// smallestChild returns the index of i's earliest child, or -1.
func (q *queue) smallestChild(i, n int) int {
	first := i*arity + 1
	if first >= n {
		return -1
	}
	best := first
	for c := first + 1; c < first+arity && c < n; c++ {
		if q.items[c].due < q.items[best].due {
			best = c
		}
	}
	return best
}

func (q *queue) place(i int, e entry) {
	q.items[i] = e
	q.pos[e.id] = int32(i)
}
