// Package endpoint keeps the state of the configured endpoints, derived
// from the engine's AoRs and events. An endpoint has two views, kept apart
// on purpose:
//
//   - Availability, the routing truth the API and the sinks use: an
//     endpoint is available when any of its AoRs is available (an AoR is
//     available when any contact is routable; NonQualified contacts are
//     routable, so an endpoint is available before any verdict). An
//     endpoint without an AoR is not available. See qualify-semantics §6.
//   - The log's view, as Asterisk's persistent endpoint state
//     (res_pjsip/pjsip_options.c): it starts offline and goes online when
//     one of its AoRs has a contact in service (Reachable, or Unreachable
//     with qualify_latency_only), or has qualify off and at least one
//     contact; it goes offline when the last such contact leaves service.
//     It only decides the "Endpoint NAME is now ..." log lines. See
//     qualify-semantics §10.
//
// Table is safe for concurrent use. Its update methods are meant for one
// goroutine, the consumer of the engine's events, which calls them in
// event order; Configure may run on another (a reload).
//
// It imports engine, pjsip and qualify; web and the daemon import it.
package endpoint
