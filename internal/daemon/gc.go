package daemon

import "runtime/debug"

// DefaultGCPercent is the daemon's GOGC when the environment sets none.
// The daemon makes almost no garbage while probing, so Go's collector
// seldom runs; but a burst of events (a million contacts changing status
// at start or in an outage, each logged) or a reload fills the heap up to
// the collector's goal, twice the live heap at Go's default of 100, and
// the process keeps that memory. At 50 the goal is one and a half times
// the live heap, at the cost of collecting twice as often during such a
// burst (the steady RSS it saves is in docs/performance.md).
const DefaultGCPercent = 50

// TuneGC applies DefaultGCPercent unless getenv("GOGC") is set. It changes
// the whole process, so the command calls it, not New.
func TuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
