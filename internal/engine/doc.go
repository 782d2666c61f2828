// Package engine owns the contact table. It wires the qualify state machine
// to the scheduler and a Prober: it starts each contact's probes when they
// are due, applies their results, publishes the edges (status changes,
// counted failures, AoR availability) to subscribers, serves snapshots,
// and applies new configurations with the contract's reload rule.
//
// Snapshots: an AoR, and each page of a listing (ContactsPage, AoRsPage),
// is taken at one instant. A full listing (Contacts, AoRs) is taken page
// by page, so that it never stops the probes for long: each AoR in it is
// consistent, but the table as a whole is not taken at one instant, and a
// reload between two pages shows in the later ones.
//
// Locking: one mutex (Engine.mu) guards the table, the AoRs, the waiters
// and the subscriber list. It is never held across a probe or a channel
// operation that can block. The scheduler's own lock is taken inside it,
// never the other way round. Engine.applyMu serializes Apply, the only
// writer of the AoR map, the AoRs' name order, the slots' URIs and the
// slot slice, so Apply reads those without mu while it plans a reload and
// sorts the new set, and holds mu only to put the new set in place.
package engine
