// Package metrics exports qualifyd's Prometheus metrics into a registry the
// caller injects (no promauto globals).
//
// It owns two kinds of series. Counters and histograms are fed by hooks the
// engine calls on its hot path (ObserveProbe, ObserveLateness) and by the
// engine's event stream (ObserveEvent); they use label children resolved
// once at construction, so the hooks take no lock and allocate nothing.
// Gauges of the contact table (contacts by status, routable contacts, AoRs,
// AoRs available) and the prober's counters are computed at scrape time
// from the funcs in Sources: the table is never copied per contact.
//
// The two kinds are registered in the order a daemon builds its parts: New
// before the engine (whose hooks it provides), Watch after it (reading its
// summary and the prober's counters). It imports engine and qualify only.
//
// Per-AoR series exist only when Options.PerAoR is set, and at most
// Options.PerAoRLimit distinct AoR label values are created; observations
// of further AoRs are folded into aor="_other" and counted.
package metrics
