// Package metrics exports qualifyd's Prometheus metrics into a registry the
// caller injects (no promauto globals).
//
// It owns two kinds of series. Counters and histograms are fed by hooks the
// engine calls on its hot path (ObserveProbe, ObserveLateness) and by the
// engine's event stream (ObserveEvent); they use label children resolved
// once at construction, so the hooks take no lock and allocate nothing.
// Gauges of the contact table (contacts by status, routable contacts, AoRs,
// AoRs available) and the prober's counters are computed at scrape time
// from the funcs in Options: the table is never copied per contact.
//
// Per-AoR series exist only when Options.PerAoR is set, and at most
// Options.PerAoRLimit distinct AoR label values are created; observations
// of further AoRs are folded into aor="_other" and counted.
package metrics
