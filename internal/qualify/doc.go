// Package qualify is the per-contact qualify state machine of the contract in
// docs/qualify-semantics.md: a Policy (the AoR's qualify options), the
// State of one contact (status and consecutive counters), and Observe, which
// applies one probe Result and says what changed and when the next probe is
// due.
//
// The package is pure: no goroutines, timers, locks or I/O, and only the
// standard library. Every other package imports it; it imports none of them.
// Callers pass time explicitly, so the whole behaviour is testable with
// plain time.Time values.
package qualify
