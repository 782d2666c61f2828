package sink

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// AMI drives Asterisk through the Manager interface: one custom device
// state per object (Setvar DEVICE_STATE(Custom:NAME)), or with
// Maintenance the endpoint's PJSIPSetMaintenance, and a DBPut heartbeat:
// qualifyd/failopen_at, the unix second after which the verdicts are
// stale (the beat's time plus FailOpenAfter), which docs/routers.md's dial
// plan and `qualifyd guard` compare with the clock to fail open when
// qualifyd is gone, and qualifyd/heartbeat, the beat's time.
type AMI struct {
	// Address is host:port; TLS wraps the connection.
	Address string
	TLS     bool
	// Username and Secret log in; MD5 uses the Challenge login, so that
	// the secret never crosses the wire.
	Username, Secret string
	MD5              bool
	// Prefix names the devices ("Custom:").
	Prefix string
	// Maintenance pushes PJSIPSetMaintenance (on for Down) instead of a
	// device state, and reads PJSIPShowMaintenance back (resync).
	Maintenance bool
	// FailOpenAfter is the window the heartbeat grants: failopen_at is
	// the beat's time plus FailOpenAfter.
	FailOpenAfter time.Duration
	// Timeout bounds each request, the login included.
	Timeout time.Duration
	// Dial, if set, replaces the network dial (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Events is the login's Events field: the classes of events the
	// session receives, "off" when empty.
	Events string

	conn    net.Conn
	rd      *bufio.Reader
	stop    func() bool // ends the ctx watch of the connection
	id      uint64
	skipped uint64    // events and replies to other actions, read and skipped
	until   time.Time // the fence's end (fence), zero for none
}

// maxLine bounds a Manager protocol line.
const maxLine = 64 << 10

// maxFields bounds the fields of one Manager message: a server that sends
// lines without ever ending the message is a broken router, not a reason
// to grow memory until the request's deadline.
const maxFields = 1024

func (a *AMI) connect(ctx context.Context) error {
	conn, err := a.dial(ctx)
	if err != nil {
		return fmt.Errorf("ami %s: %w", a.Address, err)
	}
	a.conn, a.rd = conn, bufio.NewReaderSize(conn, maxLine)
	a.stop = context.AfterFunc(ctx, func() { conn.Close() })
	a.deadline()
	banner, err := a.line()
	if err != nil {
		return fmt.Errorf("ami %s: banner: %w", a.Address, err)
	}
	if !strings.HasPrefix(banner, "Asterisk Call Manager/") {
		return fmt.Errorf("ami %s: not an Asterisk Manager: banner %q", a.Address, clip(banner))
	}
	if err := a.login(); err != nil {
		return fmt.Errorf("ami %s: login: %w", a.Address, err)
	}
	return nil
}

// dial connects, over TLS when asked, within Timeout.
func (a *AMI) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	dial := a.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", a.Address)
	if err != nil || !a.TLS {
		return conn, err
	}
	host, _, _ := net.SplitHostPort(a.Address)
	tc := tls.Client(conn, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// login logs in with Events (off by default), by MD5 challenge or plain secret. A
// refusal is an error: the session cannot start.
func (a *AMI) login() error {
	fields := []string{"Username", a.Username}
	if a.MD5 {
		r, err := a.action("Challenge", "AuthType", "MD5")
		if err != nil {
			return err
		}
		sum := md5.Sum([]byte(r["Challenge"] + a.Secret))
		fields = append(fields, "AuthType", "MD5", "Key", hex.EncodeToString(sum[:]))
	} else {
		fields = append(fields, "Secret", a.Secret)
	}
	_, err := a.action("Login", append(fields, "Events", cmpOr(a.Events, "off"))...)
	var rej *Rejected
	if errors.As(err, &rej) {
		return rej.Err
	}
	return err
}

func (a *AMI) push(ctx context.Context, o Object) error {
	defer a.fence(ctx)()
	name, fields := a.request(o)
	_, err := a.action(name, fields...)
	return err
}

// request is the action that pushes o, and its fields.
func (a *AMI) request(o Object) (name string, fields []string) {
	if a.Maintenance {
		return maintenanceRequest(o)
	}
	value := "NOT_INUSE"
	if o.Level == Down {
		value = "UNAVAILABLE"
	}
	return "Setvar", []string{"Variable", "DEVICE_STATE(" + a.Prefix + o.Name + ")", "Value", value}
}

// maintenanceRequest is the PJSIPSetMaintenance of o's endpoint: on for
// Down, else off.
func maintenanceRequest(o Object) (name string, fields []string) {
	state := "off"
	if o.Level == Down {
		state = "on"
	}
	return "PJSIPSetMaintenance", []string{"Endpoint", o.Name, "State", state}
}

// pushBatch pipelines the pushes over the session (see batch).
func (a *AMI) pushBatch(ctx context.Context, objs []Object, errs []error) {
	defer a.fence(ctx)()
	a.batch(objs, errs, a.request)
}

// batch sends the action request makes of each of objs, pipelined: up
// to inFlight actions in one write, then their replies, matched by
// ActionID, into errs. Asterisk reads a session's actions in order and
// answers each before the next, so the window saves a round trip per
// action, not Asterisk's work.
func (a *AMI) batch(objs []Object, errs []error, request func(Object) (string, []string)) {
	for lo := 0; lo < len(objs); lo += inFlight {
		hi := min(lo+inFlight, len(objs))
		if err := a.pipeline(objs[lo:hi], errs[lo:hi], request); err != nil {
			for i := hi; i < len(objs); i++ {
				errs[i] = err
			}
			return
		}
	}
}

// pipeline writes the actions of objs at once, then reads their replies
// into errs; it returns the error that ends the session, if any, after
// setting it for each object left without a reply.
func (a *AMI) pipeline(objs []Object, errs []error, request func(Object) (string, []string)) error {
	var b strings.Builder
	names, ids := make([]string, len(objs)), make([]string, len(objs))
	for i, o := range objs {
		var fields []string
		names[i], fields = request(o)
		ids[i] = a.nextID()
		frame(&b, names[i], ids[i], fields)
	}
	a.deadline()
	if _, err := a.conn.Write([]byte(b.String())); err != nil {
		err = fmt.Errorf("ami %s: %s: %w", a.Address, names[0], err)
		fillFrom(errs, 0, err)
		return err
	}
	for i := range objs {
		a.deadline()
		_, errs[i] = a.answer(names[i], ids[i])
		var rej *Rejected
		if errs[i] != nil && !errors.As(errs[i], &rej) {
			fillFrom(errs, i, errs[i])
			return errs[i]
		}
	}
	return nil
}

// fillFrom sets errs[i:] to err.
func fillFrom(errs []error, i int, err error) {
	for ; i < len(errs); i++ {
		errs[i] = err
	}
}

// The astdb keys of the heartbeat: Family qualifyd, these keys.
const (
	// keyFailOpenAt holds the unix second after which the router treats
	// the verdicts as stale.
	keyFailOpenAt = "failopen_at"
	// keyHeartbeat holds the unix second of the last beat.
	keyHeartbeat = "heartbeat"
)

// heartbeat writes failopen_at, then the beat's time. The deadline is in
// whole seconds, rounded down: a router that fails open when its clock's
// second is past it (${EPOCH} > failopen_at) does so after FailOpenAfter,
// and at most a second later.
func (a *AMI) heartbeat(ctx context.Context) error {
	defer a.fence(ctx)()
	now := time.Now()
	until := now.Add(a.FailOpenAfter).Unix()
	if _, err := a.action("DBPut", "Family", "qualifyd", "Key", keyFailOpenAt, "Val", strconv.FormatInt(until, 10)); err != nil {
		return err
	}
	_, err := a.action("DBPut", "Family", "qualifyd", "Key", keyHeartbeat, "Val", strconv.FormatInt(now.Unix(), 10))
	return err
}

// inMaintenance returns the endpoints Asterisk holds in maintenance
// (PJSIPShowMaintenance).
func (a *AMI) inMaintenance() (map[string]bool, error) {
	events, err := a.list("PJSIPShowMaintenance")
	if err != nil {
		return nil, err
	}
	in := map[string]bool{}
	for _, e := range events {
		if e["Event"] == "PJSIPMaintenanceStatus" && e["Status"] == "enabled" {
			in[e["Endpoint"]] = true
		}
	}
	return in, nil
}

// maintenance is the method=maintenance driver: an AMI that reads the
// maintenance set back every resync, so that an endpoint taken out of
// maintenance behind qualifyd's back (by `qualifyd guard`, an operator,
// an Asterisk restart) is put back.
type maintenance struct{ *AMI }

// phrase names k as what Asterisk holds: an endpoint in maintenance,
// or out of it.
func (maintenance) phrase(k Key, level Level) string {
	if level == Down {
		return "endpoint " + k.Name + " is now in maintenance in the router"
	}
	return "endpoint " + k.Name + " is now out of maintenance in the router"
}

func (m maintenance) resync(context.Context) (func(Key) (Level, bool), error) {
	in, err := m.inMaintenance()
	if err != nil {
		return nil, err
	}
	return func(k Key) (Level, bool) {
		if in[k.Name] {
			return Down, true
		}
		return Up, true
	}, nil
}

func (a *AMI) close() {
	if a.conn == nil {
		return
	}
	a.stop()
	a.conn.Close()
	a.conn, a.rd = nil, nil
}

// action sends one action with a fresh ActionID and returns its reply's
// fields. "Response: Error" is a *Rejected with the reply's Message;
// a broken or stalled connection is any other error.
func (a *AMI) action(name string, fields ...string) (map[string]string, error) {
	return a.send(name, a.nextID(), fields)
}

// nextID returns a fresh ActionID.
func (a *AMI) nextID() string {
	a.id++
	return "qualifyd-" + strconv.FormatUint(a.id, 10)
}

// send sends one action with ActionID id and returns its reply's fields,
// as action does.
func (a *AMI) send(name, id string, fields []string) (map[string]string, error) {
	var b strings.Builder
	frame(&b, name, id, fields)
	a.deadline()
	if _, err := a.conn.Write([]byte(b.String())); err != nil {
		return nil, fmt.Errorf("ami %s: %s: %w", a.Address, name, err)
	}
	return a.answer(name, id)
}

// frame appends one action to b: its name, ActionID id and fields
// (name, value pairs).
func frame(b *strings.Builder, name, id string, fields []string) {
	b.WriteString("Action: " + name + "\r\nActionID: " + id + "\r\n")
	for i := 0; i+1 < len(fields); i += 2 {
		b.WriteString(fields[i] + ": " + fields[i+1] + "\r\n")
	}
	b.WriteString("\r\n")
}

// answer reads the reply to action name sent as id and returns its
// fields, as send does.
func (a *AMI) answer(name, id string) (map[string]string, error) {
	r, err := a.reply(id)
	if err != nil {
		return nil, fmt.Errorf("ami %s: %s: %w", a.Address, name, err)
	}
	switch r["Response"] {
	case "Success":
		return r, nil
	case "Error":
		return nil, &Rejected{Err: fmt.Errorf("%s: %s", name, cmpOr(r["Message"], "Response: Error"))}
	}
	return nil, fmt.Errorf("ami %s: %s: unexpected response %q", a.Address, name, clip(r["Response"]))
}

// list sends an action whose reply is a list of events (EventList:
// start) and returns those events, up to the one with EventList:
// Complete.
func (a *AMI) list(name string, fields ...string) ([]map[string]string, error) {
	id := a.nextID()
	if _, err := a.send(name, id, fields); err != nil {
		return nil, err
	}
	var events []map[string]string
	for {
		m, err := a.message()
		if err != nil {
			return nil, fmt.Errorf("ami %s: %s: %w", a.Address, name, err)
		}
		switch {
		case m["ActionID"] != id:
			a.skipped++
		case m["EventList"] == "Complete":
			return events, nil
		case len(events) >= maxEvents:
			return nil, fmt.Errorf("ami %s: %s: more than %d events", a.Address, name, maxEvents)
		default:
			events = append(events, m)
		}
	}
}

// maxEvents bounds the events of one list reply: more than any
// Asterisk's endpoints, and a bound on the memory a broken Manager can
// make a list take.
const maxEvents = 1 << 18

// deadline bounds the next request by Timeout, and by the fence's end
// when one is set.
func (a *AMI) deadline() {
	d := time.Now().Add(a.Timeout)
	if !a.until.IsZero() && a.until.Before(d) {
		d = a.until
	}
	a.conn.SetDeadline(d)
}

// fence bounds the requests that follow by ctx's deadline (a cluster
// leader's lease, Config.Gate) until the function it returns is called.
func (a *AMI) fence(ctx context.Context) func() {
	a.until, _ = ctx.Deadline()
	return func() { a.until = time.Time{} }
}

// reply reads messages until the one answering id, skipping events and
// replies to other actions.
func (a *AMI) reply(id string) (map[string]string, error) {
	for {
		m, err := a.message()
		if err != nil {
			return nil, err
		}
		if m["ActionID"] == id && m["Response"] != "" {
			return m, nil
		}
		a.skipped++
	}
}

// message reads one message: "Key: Value" lines up to an empty line.
// Lines without ": " are skipped; a message of more than maxFields lines
// is an error.
func (a *AMI) message() (map[string]string, error) {
	m := map[string]string{}
	for n := 0; ; n++ {
		if n > maxFields {
			return nil, fmt.Errorf("a message of more than %d lines", maxFields)
		}
		line, err := a.line()
		if err != nil {
			return nil, err
		}
		if line == "" {
			if len(m) > 0 {
				return m, nil
			}
			continue
		}
		if k, v, ok := strings.Cut(line, ": "); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
}

// line reads one line without its CRLF (or LF).
func (a *AMI) line() (string, error) {
	b, err := a.rd.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errors.New("line too long")
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// clip shortens a router's text for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
