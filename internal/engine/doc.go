// Package engine owns the contact table. It wires the qualify state machine
// to the scheduler and a Prober: it starts each contact's probes when they
// are due, applies their results, publishes the edges (status changes,
// counted failures, AoR availability) to subscribers, serves consistent
// snapshots, and applies new configurations with the contract's reload
// rule.
//
// Locking: one mutex (Engine.mu) guards the table, the AoRs, the waiters
// and the subscriber list. It is never held across a probe or a channel
// operation that can block. The scheduler's own lock is taken inside it,
// never the other way round. Engine.applyMu serializes Apply, the only
// writer of the AoR map, the slots' URIs and the slot slice, so Apply reads
// those without mu while it plans a reload, and holds mu only to put the
// new set in place.
package engine
