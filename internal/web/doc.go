// Package web serves qualifyd's HTTP interface on its own ServeMux: the
// JSON API over the engine's snapshots and the endpoint table
// (internal/endpoint), manual qualify and reload, the
// Server-Sent Events stream of engine events with replay from a bounded
// ring, the Prometheus exposition, a health check, and the HTML status
// page: GET / and /aors/NAME, with charts of the AoRs' history drawn as
// inline SVG by the server (page_svg.go) and a small embedded script that
// follows the event stream (the templates, style sheet and script are
// under page/).
//
// Write routes (POST) need "Authorization: Bearer TOKEN" when a token is
// configured; ListenCheck refuses a non-loopback address without one.
// Every error is JSON {"error": "..."} with a 4xx or 5xx status; a handler
// panic is answered with 500 and counted, never crashing the daemon.
//
// Server.Run is the event pump: it subscribes to the engine, encodes each
// event once into the ring, and wakes the stream handlers, which each read
// the ring at their own pace. The pump never writes to a client, so a slow
// client cannot hold it up; a client that falls more than the ring behind
// receives a "gap" event and resumes at the oldest event kept.
//
// Listings (/api/v1/contacts, /api/v1/aors, /api/v1/endpoints) are
// streamed page by page in name order with the same after, limit and
// "next" conventions. The objects are internal/api's, built in json.go.
//
// In cluster mode the daemon gives two hooks (Config.Cluster and
// Config.Votes): GET /api/v1/cluster serves the first (cluster.go), each
// contact object carries the second's answer (one call per contact
// served), and the page shows a cluster tile and each vantage's vote.
// Without them, or while they say this is no cluster, every reply is
// the single node's.
// It imports api, engine, endpoint, qualify, asterisk and sink;
// the daemon builds it.
package web
