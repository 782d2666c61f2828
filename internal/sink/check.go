package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// CheckResult is what Check found of one sink's router.
type CheckResult struct {
	Name, Driver string
	// Objects is how many objects the sink keeps for the configuration
	// (devices, hosts, or a webhook's contacts, AoRs and endpoints).
	Objects int
	// Found says what the router confirmed ("logged in; may run Setvar
	// and DBPut", "dispatcher.list has 3 of the 4 hosts"); "" when it was
	// not contacted.
	Found string
	// Unlisted are the objects the router does not know (Kamailio: hosts
	// in no dispatcher set, which the sink never touches), sorted.
	Unlisted []string
	// Skipped says why the router was not contacted.
	Skipped string
	// Err is why the sink cannot work; nil when it can.
	Err error
}

// Check contacts each of conf's sinks' routers once and changes nothing
// there: an Asterisk Manager is logged in to and asked with ListCommands
// whether the user may run the actions the sink sends; a Kamailio's
// dispatcher.list is read and matched with the sink's hosts; a webhook's
// receiver is connected to (and its TLS certificate verified, for
// https), without a request: a change or a heartbeat would tell the
// receiver something. dial, if set, replaces the AMI drivers' network
// dial.
func Check(ctx context.Context, conf *pjsip.Config, dial func(ctx context.Context, network, addr string) (net.Conn, error)) []CheckResult {
	out := make([]CheckResult, 0, len(conf.Sinks))
	for _, def := range conf.Sinks {
		p := newPlan(def, conf)
		r := CheckResult{Name: def.Name, Driver: def.Driver, Objects: len(p.deps)}
		switch drv := newDriver(def, dial).(type) {
		case *AMI:
			r.Found, r.Err = checkAMI(ctx, drv, def)
		case maintenance:
			r.Found, r.Err = checkAMI(ctx, drv.AMI, def)
		case *Kamailio:
			r.Found, r.Unlisted, r.Err = checkKamailio(ctx, drv, p, def.HeartbeatInterval > 0)
		case *Webhook:
			r.Found, r.Err = checkWebhook(ctx, drv)
		}
		out = append(out, r)
	}
	return out
}

// checkAMI logs in and checks with ListCommands, which lists the actions
// the user's write= permissions allow, that it may run every action the
// sink sends: Setvar (call), or PJSIPSetMaintenance and
// PJSIPShowMaintenance (system) for the objects, and DBPut (system) for
// the heartbeat.
func checkAMI(ctx context.Context, a *AMI, def *pjsip.Sink) (string, error) {
	if err := a.connect(ctx); err != nil {
		return "", err
	}
	defer a.close()
	allowed, err := a.action("ListCommands")
	var rej *Rejected
	if errors.As(err, &rej) {
		return "", fmt.Errorf("ami %s: %w", a.Address, rej.Err)
	}
	if err != nil {
		return "", err
	}
	need := []string{"Setvar"}
	if a.Maintenance {
		need = []string{"PJSIPSetMaintenance", "PJSIPShowMaintenance"}
	}
	if def.HeartbeatInterval > 0 {
		need = append(need, "DBPut")
	}
	var denied []string
	for _, act := range need {
		if _, ok := allowed[act]; !ok {
			denied = append(denied, act)
		}
	}
	if len(denied) > 0 {
		return "", fmt.Errorf("ami %s: user %q may not run %s: give it write=call,system in manager.conf",
			a.Address, a.Username, andList(denied))
	}
	return "logged in as " + a.Username + "; may run " + andList(need), nil
}

// andList is "a", "a and b", "a, b and c".
func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// checkKamailio reads dispatcher.list and counts the plan's hosts it
// lists; with a heartbeat, it checks that the heartbeat's htable is
// there, with autoexpire (htable.listTables).
func checkKamailio(ctx context.Context, k *Kamailio, p *plan, beats bool) (string, []string, error) {
	if beats {
		if err := checkHeartbeatTable(ctx, k); err != nil {
			return "", nil, err
		}
	}
	level, err := k.resync(ctx)
	if err != nil {
		return "", nil, err
	}
	var unlisted []string
	for key := range p.deps {
		if _, ok := level(key); !ok {
			unlisted = append(unlisted, key.Name)
		}
	}
	slices.Sort(unlisted)
	n := len(p.deps)
	return fmt.Sprintf("dispatcher.list has %d of the %d hosts", n-len(unlisted), n), unlisted, nil
}

// htableInfo is one table of htable.listTables: its name and its
// autoexpire (seconds; 0 none).
type htableInfo struct {
	Name   string `json:"name"`
	Expire int    `json:"expire"`
}

// checkHeartbeatTable checks that Kamailio has the heartbeat's htable
// and that it expires items: htable's timer skips a table without
// autoexpire, so its item would never expire and Kamailio never fail
// open.
func checkHeartbeatTable(ctx context.Context, k *Kamailio) error {
	var tables []htableInfo
	err := k.call(ctx, "htable.listTables", nil, &tables)
	var rej *Rejected
	if err != nil && !errors.As(err, &rej) {
		return err
	}
	i := slices.IndexFunc(tables, func(t htableInfo) bool { return t.Name == heartbeatTable })
	if err != nil || i < 0 || tables[i].Expire <= 0 {
		return fmt.Errorf("kamailio %s: no htable %q with autoexpire: kamailio.cfg needs the fail-open lines of docs/routers.md, or Kamailio never fails open when qualifyd stops", k.URL, heartbeatTable)
	}
	return nil
}

// checkWebhook connects to the receiver of w, within its timeout, with a
// TLS handshake for https, and hangs up without sending a request.
func checkWebhook(ctx context.Context, w *Webhook) (string, error) {
	u, err := url.Parse(w.URL)
	if err != nil { // a *url.Error: its cause alone, without the URL
		return "", fmt.Errorf("webhook %s: %w", RedactURL(w.URL), errors.Unwrap(err))
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", RedactURL(w.URL), err)
	}
	defer conn.Close()
	if u.Scheme != "https" {
		return "connected to " + addr + "; nothing sent", nil
	}
	tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname()})
	if err := tc.HandshakeContext(ctx); err != nil {
		return "", fmt.Errorf("webhook %s: TLS: %w", RedactURL(w.URL), err)
	}
	return "connected to " + addr + ", certificate verified; nothing sent", nil
}
