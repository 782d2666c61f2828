// Package schedule runs jobs at due times: one loop, one timer, an indexed
// 4-ary min-heap of due times, and a bounded number of jobs in flight.
//
// Items are small integer IDs (the engine's contact slots). An item is
// either waiting in the heap, running, or idle; the scheduler never runs an
// item twice at once because running removes it from the heap, and only the
// owner puts it back (Set) when it knows the next due time. There is no
// goroutine, timer or socket per item: a million waiting items cost 20
// bytes each.
package schedule
