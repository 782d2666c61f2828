// Package source reads the lists a router already keeps and turns their
// entries into the objects of qualifyd's configuration: one driver per
// list, Kamailio's dispatcher over JSON-RPC (driver=kamailio, through
// sink.Kamailio's reading of dispatcher.list), Kamailio's dispatcher
// list file (driver=dispatcher_file, dispatcher.go) and Asterisk's
// realtime tables in PostgreSQL, MySQL or MariaDB (driver=realtime,
// realtime.go, with realtime_postgres.go and realtime_mysql.go: a row of
// ps_aors, ps_endpoints or ps_auths becomes the AoR, endpoint or auth
// named by its id, its columns the options of their names). A Driver
// reads its list once and returns pjsip.Objects, which the configuration reader
// adds where the type=source section ends (pjsip.Options.Import): a
// destination becomes one AoR with one contact, its URI, named by its
// duid attribute or ds<SET>-<host>-<port>; disabled destinations are
// skipped; qualify options come from the source's template and the
// file's overlays, never from the router's attributes.
//
// Keeper (keeper.go) holds each source's last good list: it applies the
// shrink guard (a read that returns nothing, or fewer than half of the
// AoRs, is refused and the last good list kept), keeps the lists in a
// file of their own so that a start without the router uses them, and
// reports each source's status for the metrics and the API. It never
// logs: it returns what happened and the daemon logs it.
//
// Imports: pjsip, sink, sipuri; github.com/jackc/pgx/v5 for PostgreSQL,
// github.com/go-sql-driver/mysql for MySQL and MariaDB.
package source
