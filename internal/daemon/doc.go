// Package daemon is the assembly that `qualifyd run` and `qualifyd demo`
// share: it loads the configuration (at start, on SIGHUP and on the API's
// reload), builds the prober, the engine, the endpoint table, the metrics
// and the HTTP front in that order, and runs them until its context ends,
// logging the engine's edges and the endpoint lines in Asterisk's words
// and order (docs/qualify-semantics.md §10), and feeding the sinks on a
// subscription of their own. The log never waits for its reader: a
// bounded buffer that one goroutine writes out, which drops (and counts)
// what a stalled stdout does not take (logwriter.go). It keeps the state and history
// files (state.go) and tells the service manager when it is ready and that
// its engine still answers (notify.go).
//
// A command fills a Config, calls New, then Run. New fails before anything
// is sent when the configuration is broken or a port is busy.
//
// It may import every internal package; only cmd imports it.
package daemon
