// Package schedule runs jobs at due times: one loop, one timer, an indexed
// 4-ary min-heap of due times, and a bounded number of jobs in flight.
//
// Items are small integer IDs (the engine's contact slots). An item is
// either waiting in the heap, running, or idle; the scheduler never runs an
// item twice at once because running removes it from the heap, and only the
// owner puts it back, with Finish when its job ends or with Set, once it
// knows the next due time. A job is started by the loop (the StartFunc,
// which must not block) and ended by Finish from any goroutine, so no
// goroutine waits for a job in flight. There is no goroutine, timer or
// socket per item: a million waiting items cost 20 bytes each.
//
// Run is the loop; Next and StartDue step the same dispatch in a caller's
// virtual time instead (a simulator's).
package schedule
