package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// certWarning is how long before its certificate expires a node warns at
// each start and reload.
const certWarning = 14 * 24 * time.Hour

// serverLog is the ServerLog hook: the embedded NATS server's errors
// (a route refused, with the peer's address) in the log, at most
// natsLines of each kind a natsWindow, so that a host that keeps dialling
// a route port cannot fill the log, nor hide another refusal.
func (n *node) serverLog(line string) {
	pass, held := n.natsLog.take(n.d.log.now(), natsKind(line))
	if held > 0 {
		n.d.log.Notice(slog.LevelWarn, fmt.Sprintf("cluster: NATS: %d more errors were not logged (at most %d of a kind a minute)", held, natsLines))
	}
	if pass {
		n.d.log.Notice(slog.LevelWarn, "cluster: NATS: "+line)
	}
}

// natsLines lines of each kind of the embedded server's errors are
// logged in each natsWindow (serverLog's count line says "a minute"), of
// at most natsKinds kinds (the rest share one count); the others are
// counted, and the count logged with the first line of a later window.
const (
	natsLines  = 10
	natsKinds  = 32
	natsWindow = time.Minute
)

// natsKind is a server error's kind: its text without the connection's
// address and id ("127.0.0.1:50144 - rid:9 - TLS route handshake error:
// ..." is of the kind "TLS route handshake error: ...").
func natsKind(line string) string {
	parts := strings.SplitN(line, " - ", 3)
	if len(parts) == 3 && strings.Contains(parts[1], "id:") {
		return parts[2]
	}
	return line
}

// lineLimit lets natsLines lines of each kind through in each natsWindow
// from the window's first line.
type lineLimit struct {
	mu     sync.Mutex
	start  time.Time      // the window's first line; zero before any
	passed map[string]int // lines let through in the window, by kind ("" for the kinds past natsKinds)
	held   int            // lines held back since the count was last told
}

// take says whether a line of kind at now may be logged, and how many
// were held back before it and must be told now (0 for none, or while
// the window that held them lasts).
func (l *lineLimit) take(now time.Time, kind string) (pass bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() || now.Sub(l.start) >= natsWindow {
		l.start, l.passed = now, map[string]int{}
		held, l.held = l.held, 0
	}
	if _, ok := l.passed[kind]; !ok && len(l.passed) >= natsKinds {
		kind = ""
	}
	if l.passed[kind] < natsLines {
		l.passed[kind]++
		return true, held
	}
	l.held++
	return false, held
}

// warnSecurity logs, at start, that the routes are
// in clear off loopback (insecure_routes=yes), that a secret to an
// external NATS may be (insecure_nats=yes), and that the node's
// certificate expires within certWarning of now.
func (n *node) warnSecurity(expiry, now time.Time) {
	if n.cfg.InsecureRoutes && !n.cfg.RouteTLS() {
		n.d.log.Notice(slog.LevelWarn, "cluster: insecure_routes=yes: the routes are neither encrypted nor authenticated by certificate; any host that reaches a route port can join the cluster")
	}
	if n.cfg.InsecureNATS && n.cfg.NATSURL != "" {
		n.d.log.Notice(slog.LevelWarn, "cluster: insecure_nats=yes: the password or token to the external NATS (nats_url) may cross the network in clear; any host on the path can read it and use the account")
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
