package daemon

import (
	"fmt"
	"log/slog"
	"time"
)

// certWarning is how long before its certificate expires a node warns at
// each start and reload.
const certWarning = 14 * 24 * time.Hour

// serverLog is the ServerLog hook: the embedded NATS server's errors
// (a route refused, with the peer's address) in the log.
func (n *node) serverLog(line string) {
	n.d.log.Notice(slog.LevelWarn, "cluster: NATS: "+line)
}

// warnSecurity logs, at start, that the routes are
// in clear off loopback (insecure_routes=yes), and that the node's
// certificate expires within certWarning of now.
func (n *node) warnSecurity(expiry, now time.Time) {
	if n.cfg.InsecureRoutes && !n.cfg.RouteTLS() {
		n.d.log.Notice(slog.LevelWarn, "cluster: insecure_routes=yes: the routes are neither encrypted nor authenticated by certificate; any host that reaches a route port can join the cluster")
	}
	n.warnExpiry(expiry, now)
}

// warnExpiry logs that the node's certificate expires within certWarning
// of now.
func (n *node) warnExpiry(expiry, now time.Time) {
	if !expiry.IsZero() && expiry.Sub(now) < certWarning {
		n.d.log.Notice(slog.LevelWarn, fmt.Sprintf("cluster: this node's certificate expires at %s (in %s): renew it, then reload",
			expiry.UTC().Format(time.RFC3339), expiry.Sub(now).Round(time.Minute)))
	}
}

// reloadFiles reads the cluster's certificates, keys and CAs again (a
// reload), keeping the old ones on an error, which it logs.
func (n *node) reloadFiles() {
	expiry, err := n.c.Reload()
	if err != nil {
		n.d.log.Notice(slog.LevelError, "cluster: reload: keeping the certificates it had: "+err.Error())
		return
	}
	n.warnExpiry(expiry, time.Now())
}
