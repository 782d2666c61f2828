// Package sink keeps routers in step with qualifyd's verdicts: Asterisk
// through the Manager interface (ami.go), Kamailio's dispatcher through
// JSON-RPC (kamailio.go), and any HTTP receiver through a signed webhook
// (webhook.go).
//
// Every driver sits behind one level-based reconciler (reconciler.go:
// the objects and their levels; session.go: its loop and timers).
// For each object a sink manages (an Asterisk device, a dispatcher
// destination's host and port, a webhook's contact, AoR or endpoint) it
// holds the level qualifyd wants and the level the router last
// confirmed, and pushes the difference: a burst of changes coalesces to
// the latest level of each object, memory is bounded by the number of
// objects, and a slow or dead router never blocks the caller. On every
// (re)connect and every reassert interval the whole state is pushed
// again, so a lost request or a restarted router heals itself.
// Failures reconnect with capped backoff; meanwhile a router that can be
// probed cheaply (alive.go) is probed every 2 s, and a router that
// answers again after a probe it did not answer is reconnected at once.
// A webhook cannot fail open by itself, so every body carries expires
// and a heartbeat moves it (webhook.go).
//
// Drivers that can renew a heartbeat the router checks (ami: an astdb
// key; kamailio: an htable item with an expiry), at connect before any
// read-back or push, then every heartbeat interval: a router whose
// heartbeat goes stale routes every object again (fail-open), so a dead
// or stalled qualifyd never leaves routing worse than none.
//
// The daemon never forwards raw events: on every event about an AoR it
// asks the Group to recompute, from the engine's snapshot, the level of
// every object that depends on that AoR (plan.go). A contact with no
// verdict yet (NonQualified) has no level (Unknown): nothing is pushed
// for it and the router keeps what it had (docs/qualify-semantics.md §6).
//
// Two overrides push Up in place of a wanted Down, one mechanism
// (override.go): a panic (panic.go), while more than panic_threshold
// percent of the distinct destinations are failing at once, which is
// more likely qualifyd's own fault, holds every reconciler, the verdicts
// going on underneath, and short of one, above panic_hold_threshold
// percent recently failing (their streak begun within the wait), a Down
// that follows an Up waits a bounded time for it (the lower mark); a release, when a sink leaves the configuration
// or its router changes (and for `qualifyd release`, release.go),
// pushes Up what the router may hold Down, then forgets it. The Group
// keeps the destinations' counts, so that the rule costs O(1) per status
// change.
//
// The other way, an ami sink with observe_calls=yes also hears
// Asterisk's calls: Watchers (watchers.go) runs a Calls (calls.go) per
// such sink, a Manager session of its own with call events, whose Legs
// (legs.go, pure and bounded) turn the outcome of each outgoing PJSIP leg
// into observe.Observations for the daemon's observe.Sink.
//
// Check (check.go) contacts each router once and changes nothing, for
// `qualifyd check-config --connect`.
//
// Whatever a sink pushes carries a way back that works without qualifyd:
// the AMI heartbeat writes qualifyd/failopen_at, after which the
// docs/routers.md's dial plan stops believing the device states, and Guard
// (guard.go, `qualifyd guard`, run beside Asterisk) takes a
// method=maintenance sink's endpoints out of maintenance, which Asterisk
// would otherwise keep forever.
package sink
