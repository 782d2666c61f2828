// Package engine owns the contact table. It wires the qualify state machine
// to the scheduler and a Prober: it starts each contact's probes when they
// are due (docs/qualify-semantics.md §7), applies their results (§4, §5),
// publishes the edges (status changes, counted failures, AoR availability,
// §6) to subscribers, serves snapshots, and applies new configurations with
// the contract's reload rule (§8).
//
// # How a probe runs
//
// Every probe runs one way. The scheduler's loop takes a contact whose
// probe is due and calls the engine's job, which marks the slot's probe in
// flight and calls Prober.Start with the contact's target and its slot as
// the tag. Start returns at once; the prober's own goroutines (its receive
// loop, its timers) later call done(tag, result), which applies the result
// under the engine's lock, publishes the edges, answers the waiters of a
// manual qualify, and finishes the scheduler's job at the contact's next
// due time. The prober owns the transaction and its timers (§3: Timers E,
// F, K and the qualify deadline); the engine owns the schedule and the
// verdict. No goroutine, timer or closure exists per probe in flight.
//
// A Driver replaces Run's loop for a discrete-event simulator: it starts
// the due probes in the caller's time through the same job and Prober,
// and the simulator's prober calls done at each probe's end.
//
// SetProbed restricts probing to the contacts a Probed test gives (a
// cluster node's share): the others stay in the table, NonQualified and
// out of the schedule, and the same loop probes the rest.
//
// A contact removed by a reload while its probe is in flight keeps its
// slot until done comes (a zombie), then the slot is freed; its result is
// not applied. Results that come after Run's context is cancelled are not
// applied either, and the waiters of a manual qualify get the context's
// error.
//
// # Snapshots
//
// An AoR, and each page of a listing (ContactsPage, AoRsPage), is taken at
// one instant. A full listing (Contacts, AoRs) is taken page by page, so
// that it never stops the probes for long: each AoR in it is consistent,
// but the table as a whole is not taken at one instant, and a reload
// between two pages shows in the later ones.
//
// # Statistics and history
//
// Each applied result also feeds the contact's running statistics (see
// Stats), a few words in its slot, and, for the AoRs that have one (the
// first Config.HistoryAoRs), the AoR's history: buckets aligned to the
// wall clock and its latest status changes (see History). A slot has a
// flag for its AoR's history, so that the probes of the other AoRs never
// touch their AoR. Both are updated under the engine's lock, in the
// result's path; neither decides anything (qualify-semantics §5).
//
// # Locking
//
// One mutex (Engine.mu) guards the table, the AoRs, the waiters and the
// subscriber list. It is never held across a call of the Prober or a
// channel operation that can block, so done may come from any goroutine,
// even from inside Start. The scheduler's own lock is taken inside it,
// never the other way round. Engine.applyMu serializes Apply, the only
// writer of the AoR map, the AoRs' name order, the slots' URIs and the
// slot slice, so Apply reads those without mu while it plans a reload and
// sorts the new set, and holds mu only to put the new set in place.
package engine
