package sink

import (
	"bufio"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeManager is a strict Asterisk Manager server, written from the
// protocol's documentation: a banner line, then actions and replies of
// "Key: Value" CRLF lines ended by an empty line, an ActionID echoed in
// each reply, Challenge/Login (MD5 key = md5hex(challenge + secret)),
// a session closed after a failed login, and Setvar, Getvar, DBPut and
// PJSIPSetMaintenance, each refused ("Permission denied") unless the
// user's write= classes hold its authority, and ListCommands, which
// lists the actions they allow, as main/manager.c does.
type fakeManager struct {
	secret string
	// perms are the user's write= classes; nil allows every action.
	perms []string
	// split writes every reply a byte at a time; noisy adds events,
	// replies to other ActionIDs and garbage lines before each reply.
	split, noisy bool
	// stall and cut name an action whose next reply never comes, or is
	// cut off mid-way by closing the connection.
	stall, cut string
	// events is the Events a login must ask for, "off" when empty.
	events string
	// onSetvar, if set, is called with each Setvar (with mu held).
	onSetvar func(variable, value string)

	mu      sync.Mutex
	actions []map[string]string
	vars    map[string]string
	db      map[string]string
	maint   map[string]string
	// dials counts the connections that sent an action: sessions, not
	// the reconciler's probes, which read the banner and hang up.
	dials int
}

func newFakeManager(secret string) *fakeManager {
	return &fakeManager{secret: secret, vars: map[string]string{}, db: map[string]string{}, maint: map[string]string{}}
}

func (f *fakeManager) dial(context.Context, string, string) (net.Conn, error) {
	client, server := net.Pipe()
	go f.serve(server)
	return client, nil
}

const challenge = "840415273"

func (f *fakeManager) serve(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	if !f.write(c, "Asterisk Call Manager/9.0.0\r\n") {
		return
	}
	authed := false
	for first := true; ; first = false {
		m, ok := readAction(rd)
		if !ok {
			return
		}
		f.mu.Lock()
		if first {
			f.dials++
		}
		f.actions = append(f.actions, m)
		f.mu.Unlock()
		reply, end := f.answer(m, &authed)
		if reply == "" {
			continue
		}
		if f.noisy {
			reply = "Event: FullyBooted\r\nPrivilege: system,all\r\nnot a header line\r\nStatus: Fully Booted\r\n\r\n" +
				"Response: Success\r\nActionID: someone-else\r\nMessage: Variable Set\r\n\r\n" + reply
		}
		if !f.write(c, reply) || end {
			return
		}
	}
}

// readAction reads one action, or false when the client hung up.
func readAction(rd *bufio.Reader) (map[string]string, bool) {
	m := map[string]string{}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return nil, false
		}
		if !strings.HasSuffix(line, "\r\n") {
			panic(fmt.Sprintf("line without CRLF: %q", line))
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			return m, true
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			panic(fmt.Sprintf("malformed header %q", line))
		}
		m[k] = v
	}
}

// answer returns the reply to m ("" for none) and whether the session
// ends after it.
func (f *fakeManager) answer(m map[string]string, authed *bool) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, act := m["ActionID"], m["Action"]
	if id == "" {
		return "Response: Error\r\nMessage: qualifyd must send an ActionID\r\n\r\n", true
	}
	reply := func(resp, rest string) string {
		return "Response: " + resp + "\r\nActionID: " + id + "\r\n" + rest + "\r\n"
	}
	switch {
	case act == f.stall:
		f.stall = ""
		return "", false
	case act == f.cut:
		f.cut = ""
		return "Response: Succ", true
	case act == "Challenge" && m["AuthType"] == "MD5":
		return reply("Success", "Challenge: "+challenge+"\r\n"), false
	case act == "Login":
		sum := md5.Sum([]byte(challenge + f.secret))
		ok := m["Secret"] == f.secret || m["AuthType"] == "MD5" && m["Key"] == hex.EncodeToString(sum[:])
		if !ok || m["Events"] != cmpOr(f.events, "off") {
			return reply("Error", "Message: Authentication failed\r\n"), true
		}
		*authed = true
		return reply("Success", "Message: Authentication accepted\r\n"), false
	case !*authed:
		return reply("Error", "Message: Authentication Required\r\n"), true
	case !f.allows(act):
		return reply("Error", "Message: Permission denied\r\n"), false
	case act == "ListCommands":
		var b strings.Builder
		names := make([]string, 0, len(authority))
		for name := range authority {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if f.allows(name) {
				fmt.Fprintf(&b, "%s: The %s action. (Priv: %s)\r\n", name, name, cmp.Or(authority[name], "<none>"))
			}
		}
		return reply("Success", b.String()), false
	case act == "Setvar":
		f.vars[m["Variable"]] = m["Value"]
		if f.onSetvar != nil {
			f.onSetvar(m["Variable"], m["Value"])
		}
		return reply("Success", "Message: Variable Set\r\n"), false
	case act == "Getvar":
		return reply("Success", "Variable: "+m["Variable"]+"\r\nValue: "+f.vars[m["Variable"]]+"\r\n"), false
	case act == "DBPut":
		f.db[m["Family"]+"/"+m["Key"]] = m["Val"]
		return reply("Success", "Message: Updated database successfully\r\n"), false
	case act == "DBGet":
		v, ok := f.db[m["Family"]+"/"+m["Key"]]
		if !ok {
			return reply("Error", "Message: Database entry not found\r\n"), false
		}
		return reply("Success", "EventList: start\r\nMessage: Result will follow\r\n") +
			"Event: DBGetResponse\r\nFamily: " + m["Family"] + "\r\nKey: " + m["Key"] + "\r\nVal: " + v + "\r\nActionID: " + id + "\r\n\r\n" +
			"Event: DBGetComplete\r\nActionID: " + id + "\r\nEventList: Complete\r\nListItems: 1\r\n\r\n", false
	case act == "PJSIPSetMaintenance":
		if m["Endpoint"] == "ghost" {
			return reply("Error", "Message: Endpoint 'ghost' not found\r\n"), false
		}
		f.maint[m["Endpoint"]] = m["State"]
		return reply("Success", "Message: Maintenance mode enabled\r\n"), false
	case act == "PJSIPShowMaintenance":
		return f.showMaintenance(id), false
	}
	return reply("Error", "Message: Invalid/unknown command: "+act+"\r\n"), false
}

// authority is the permission class of each action the fake knows, as
// Asterisk registers them ("" for none).
var authority = map[string]string{"Challenge": "", "Login": "", "ListCommands": "", "Setvar": "call",
	"Getvar": "call", "DBPut": "system", "DBGet": "system", "PJSIPSetMaintenance": "system", "PJSIPShowMaintenance": "system"}

// showMaintenance is PJSIPShowMaintenance's reply, as
// res_pjsip_maintenance.c writes it: the list's start, one event per
// endpoint in maintenance, the complete event. Called with mu held.
func (f *fakeManager) showMaintenance(id string) string {
	names := make([]string, 0, len(f.maint))
	for name, state := range f.maint {
		if state == "on" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("Response: Success\r\nActionID: " + id + "\r\nEventList: start\r\nMessage: Maintenance status events follow\r\n\r\n")
	for _, n := range names {
		b.WriteString("Event: PJSIPMaintenanceStatus\r\nActionID: " + id + "\r\nEndpoint: " + n + "\r\nStatus: enabled\r\n\r\n")
	}
	fmt.Fprintf(&b, "Event: PJSIPMaintenanceStatusComplete\r\nActionID: %s\r\nEventList: Complete\r\nListItems: %d\r\n\r\n", id, len(names))
	return b.String()
}

// allows reports whether the user may run act: its authority is none, or
// one of the user's write classes. Called with mu held.
func (f *fakeManager) allows(act string) bool {
	class := authority[act]
	return f.perms == nil || class == "" || slices.Contains(f.perms, class)
}

func (f *fakeManager) write(c net.Conn, s string) bool {
	if !f.split {
		_, err := c.Write([]byte(s))
		return err == nil
	}
	for i := range len(s) {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return false
		}
	}
	return true
}

func (f *fakeManager) get(m map[string]string, k string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[k]
}

func newAMI(f *fakeManager, secret string, md5 bool) *AMI {
	return &AMI{Address: "pbx:5038", Username: "qualifyd", Secret: secret, MD5: md5, Prefix: "Custom:",
		FailOpenAfter: 30 * time.Second, Timeout: 5 * time.Second, Dial: f.dial}
}

func TestAMIPushesDeviceStatesAndHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.split, f.noisy = true, true
		a := newAMI(f, "s3cret", true)
		r := newReconciler("pbx", a, Intervals{Heartbeat: 10 * time.Second}, nil, half)
		r.Set(Key{Kind: KindDevice, Name: "pbx07"}, Down, 0)
		r.Set(Key{Kind: KindDevice, Name: "pbx08"}, Up, 0)
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "UNAVAILABLE" {
			t.Fatalf("pbx07 is %q", got)
		}
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx08)"); got != "NOT_INUSE" {
			t.Fatalf("pbx08 is %q", got)
		}
		if got, want := f.get(f.db, "qualifyd/heartbeat"), strconv.FormatInt(time.Now().Unix(), 10); got != want {
			t.Fatalf("heartbeat %q, want %q", got, want)
		}
		if got, want := f.get(f.db, "qualifyd/failopen_at"), strconv.FormatInt(time.Now().Unix()+30, 10); got != want {
			t.Fatalf("failopen_at %q, want %q (the beat + failopen_after)", got, want)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got, want := f.get(f.db, "qualifyd/heartbeat"), strconv.FormatInt(time.Now().Unix(), 10); got != want {
			t.Fatalf("heartbeat %q after 10 s, want %q", got, want)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		ids := map[string]bool{}
		for _, m := range f.actions {
			if ids[m["ActionID"]] {
				t.Fatalf("ActionID %q used twice", m["ActionID"])
			}
			ids[m["ActionID"]] = true
			if m["Secret"] != "" || strings.Contains(fmt.Sprint(m), "s3cret") {
				t.Fatalf("the MD5 login sent the secret: %v", m)
			}
		}
		if a.skipped == 0 || f.actions[0]["Action"] != "Challenge" || f.actions[1]["Events"] != "off" {
			t.Fatalf("skipped %d; actions %v", a.skipped, f.actions)
		}
		if s := r.Stats(); !s.Up || s.OK != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestAMIPlainLogin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		r := newReconciler("pbx", newAMI(f, "s3cret", false), Intervals{}, nil, half)
		r.Set(key("pbx07"), Down, 0)
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "UNAVAILABLE" {
			t.Fatalf("pbx07 is %q", got)
		}
		if f.actions[0]["Action"] != "Login" || f.actions[0]["Secret"] != "s3cret" {
			t.Fatalf("first action %v", f.actions[0])
		}
	})
}

func TestAMIWrongPasswordBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		var notes []string
		r := newReconciler("pbx", newAMI(f, "wrong", true), Intervals{}, func(_ slog.Level, msg string, _ ...slog.Attr) {
			notes = append(notes, msg)
		}, half)
		r.Set(key("pbx07"), Down, 0)
		stop := start(t, r)
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		stop()
		if f.dials != 3 {
			t.Fatalf("%d dials in 3.5 s, want 3 (at 0, 1 and 3 s)", f.dials)
		}
		want := "sink pbx: ami pbx:5038: login: Login: Authentication failed"
		if len(notes) != 3 || notes[0] != want {
			t.Fatalf("notes %q, want %q each time", notes, want)
		}
		if s := r.Stats(); s.Up || s.Pending != 1 || s.LastError != strings.TrimPrefix(want, "sink pbx: ") {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestAMIStalledServerIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.stall = "Setvar"
		r := newReconciler("pbx", newAMI(f, "s3cret", true), Intervals{}, nil, half)
		r.Set(key("pbx07"), Down, 0)
		t0 := time.Now()
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		if s := r.Stats(); s.Pending != 1 {
			t.Fatalf("stats %+v: the push must still wait", s)
		}
		time.Sleep(6 * time.Second) // the 5 s timeout, then the 1 s backoff
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "UNAVAILABLE" || f.dials != 2 {
			t.Fatalf("pbx07 is %q after %v and %d dials", got, time.Since(t0), f.dials)
		}
		if s := r.Stats(); !strings.Contains(s.LastError, "timeout") {
			t.Fatalf("last error %q, want the timeout", s.LastError)
		}
	})
}

func TestAMIClosedMidReplyReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.cut = "Setvar"
		r := newReconciler("pbx", newAMI(f, "s3cret", true), Intervals{}, nil, half)
		r.Set(key("pbx07"), Down, 0)
		stop := start(t, r)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := f.get(f.vars, "DEVICE_STATE(Custom:pbx07)"); got != "UNAVAILABLE" || f.dials != 2 {
			t.Fatalf("pbx07 is %q after %d dials", got, f.dials)
		}
	})
}

func TestAMIMaintenance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		a := newAMI(f, "s3cret", true)
		a.Maintenance = true
		r := newReconciler("pbx", a, Intervals{}, nil, half)
		r.Set(Key{Kind: KindDevice, Name: "pbx07"}, Down, 0)
		r.Set(Key{Kind: KindEndpoint, Name: "ghost"}, Down, 0)
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "on" {
			t.Fatalf("pbx07 maintenance %q", got)
		}
		if s := r.Stats(); s.Error != 1 || s.LastError != "PJSIPSetMaintenance: Endpoint 'ghost' not found" {
			t.Fatalf("stats %+v", s)
		}
		r.Set(Key{Kind: KindDevice, Name: "pbx07"}, Up, 0)
		synctest.Wait()
		if got := f.get(f.maint, "pbx07"); got != "off" {
			t.Fatalf("pbx07 maintenance %q", got)
		}
	})
}

func TestAMIRefusesAForeignBanner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &AMI{Address: "h:1", Timeout: time.Second, Dial: func(context.Context, string, string) (net.Conn, error) {
			c, s := net.Pipe()
			go func() { s.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")); s.Close() }()
			return c, nil
		}}
		err := a.connect(t.Context())
		a.close()
		if err == nil || err.Error() != `ami h:1: not an Asterisk Manager: banner "SSH-2.0-OpenSSH_9.2"` {
			t.Fatalf("error %v", err)
		}
	})
}

// TestAMIPermissionDenied: a Manager user without the call class may not
// Setvar; each refused push is a counted error with Asterisk's message,
// and the session stays up (the refusal is the router's answer).
func TestAMIPermissionDenied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.perms = []string{"system"}
		r := newReconciler("pbx", newAMI(f, "s3cret", true), Intervals{}, nil, half)
		r.Set(Key{Kind: KindDevice, Name: "pbx07"}, Down, 0)
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		if s := r.Stats(); s.Error != 1 || s.LastError != "Setvar: Permission denied" || !s.Up || s.Pending != 1 {
			t.Fatalf("stats %+v", s)
		}
		if f.dials != 1 {
			t.Fatalf("%d dials: a refusal must not end the session", f.dials)
		}
	})
}
