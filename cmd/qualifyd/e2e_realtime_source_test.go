package main

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/icholy/digest"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/peertest"
)

// TestRealtimeSource: qualifyd with only a realtime source on a real
// PostgreSQL and on a real MariaDB, each holding Asterisk's tables, read
// as a user with SELECT on the three tables alone, and no AoR written by
// hand. The static contacts are probed with the AoRs' own
// qualify_frequency, the endpoint's from_user and from_domain, and the
// credentials of its outbound_auth (the peer challenges); an UPDATE of a
// contact is followed within refresh_interval; a contact that is no SIP
// URI fails the read naming table, row and column, is counted, and the
// last good list stays; with the database stopped the last good list
// stays and qualifyd_source_up is 0; no log line or API answer shows the
// database password.
func TestRealtimeSource(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	eachRealtimeDB(t, "db-s3cret-pw", testRealtimeSource)
}

// realtimeDB is a database holding Asterisk's realtime tables, for a
// test run on each kind: exec runs SQL as its administrator, stop shuts
// it down, dsn is the dsn_file line of user qualifyd with a password.
type realtimeDB struct {
	exec     func(sql string)
	stop     func()
	dsn      func(password string) string
	password string
}

// eachRealtimeDB runs test on a PostgreSQL and on a MariaDB, each with
// Asterisk's tables and user qualifyd's password.
func eachRealtimeDB(t *testing.T, password string, test func(*testing.T, realtimeDB)) {
	t.Run("postgres", func(t *testing.T) {
		pg := peertest.StartRealtime(t, password)
		test(t, realtimeDB{exec: func(sql string) { pg.Exec("asterisk", sql) }, stop: pg.Stop, password: password,
			dsn: func(pw string) string { return fmt.Sprintf("postgres://qualifyd:%s@/asterisk?host=%s", pw, pg.Dir) }})
	})
	t.Run("mariadb", func(t *testing.T) {
		m := peertest.StartRealtimeMariaDB(t, password)
		test(t, realtimeDB{exec: func(sql string) { m.Exec("asterisk", sql) }, stop: m.Stop, password: password,
			dsn: func(pw string) string { return m.DSN("qualifyd", pw, "asterisk") }})
	})
}

func testRealtimeSource(t *testing.T, db realtimeDB) {
	dbPassword := db.password
	plain, authed, moved := startSIPPeer(t, false), startSIPPeer(t, true), startSIPPeer(t, false)
	db.exec(fmt.Sprintf(`
		INSERT INTO ps_aors (id, contact, qualify_frequency, max_contacts) VALUES
			('trunk-a', 'sip:%s', 1, 1), ('trunk-b', 'sip:%s', 1, NULL);
		INSERT INTO ps_endpoints (id, aors, context, outbound_auth, from_user, from_domain, direct_media) VALUES
			('trunk-b', 'trunk-b', 'from-trunk', 'trunk-b-auth', 'pbx', 'pbx.example.net', 'no');
		INSERT INTO ps_auths (id, auth_type, username, password, realm) VALUES
			('trunk-b-auth', 'userpass', 'alice', 'secret', 'lab')`, plain.addr, authed.addr))

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "realtime.dsn"), db.dsn(dbPassword)+"\n")
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, conf, fmt.Sprintf("[pbx-db]\ntype=source\ndriver=realtime\ndsn_file=realtime.dsn\nrefresh_interval=%d\ntimeout=5\n",
		int(sourceRefresh/time.Second))+"[trunk-a](+type=aor)\nqualify_failures=2\n")
	d := startDaemon(t, "--config", conf, "--http", "127.0.0.1:0", "--sip-bind", "127.0.0.1:0", "--state-file", filepath.Join(dir, "state"))
	base := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.expect("qualifyd: started"))[1]

	step(t, "1 the database's AoRs probed as Asterisk would", func() {
		reachable(t, base, "trunk-a", "sip:"+plain.addr)
		reachable(t, base, "trunk-b", "sip:"+authed.addr)
		aors := listAoRs(t, base)
		if got := names(aors); !slices.Equal(got, []string{"trunk-a", "trunk-b"}) {
			t.Fatalf("AoRs %v", got)
		}
		if a := aors[0]; a.Policy.Frequency != 1 || a.Policy.Failures != 2 {
			t.Fatalf("trunk-a: policy %+v, want the row's frequency 1 and the overlay's failures 2", a.Policy)
		}
		if from, n := authed.seen(); n == 0 || !strings.Contains(from, "<sip:pbx@pbx.example.net>") {
			t.Fatalf("trunk-b: %d answered challenges, last From %q", n, from)
		}
	})
	step(t, "2 an UPDATE followed within refresh_interval", func() {
		db.exec("UPDATE ps_aors SET contact = 'sip:" + moved.addr + "' WHERE id = 'trunk-a'")
		updated := time.Now()
		// When the UPDATE applied, as qualifyd stamped the removal it made.
		took := lineStamp(t, d.expect("Contact trunk-a/sip:"+plain.addr+" is now Removed.")).Sub(updated)
		t.Logf("the UPDATE applied %v after it committed, as qualifyd stamped it (refresh_interval %v)", took.Round(time.Millisecond), sourceRefresh)
		if took > 2*sourceRefresh+time.Second {
			t.Fatalf("the UPDATE took %v to follow, refresh_interval is %v", took, sourceRefresh)
		}
		reachable(t, base, "trunk-a", "sip:"+moved.addr)
		if c := listAoRs(t, base)[0].Contacts; len(c) != 1 || c[0].URI != "sip:"+moved.addr {
			t.Fatalf("trunk-a's contacts %+v", c)
		}
	})
	step(t, "3 garbage in a column: an error naming table, row and column, the last good list kept", func() {
		db.exec("UPDATE ps_aors SET contact = 'trunk-b.example.net' WHERE id = 'trunk-b'")
		d.expect(`source pbx-db: ps_aors:2: section "trunk-b": option "contact": `)
		s := sourceState(t, base)
		if s.Up || s.Errors == 0 || !strings.Contains(s.LastError, `ps_aors:2: section "trunk-b": option "contact"`) || s.AoRs != 2 {
			t.Fatalf("source %+v", s)
		}
		if got := names(listAoRs(t, base)); !slices.Equal(got, []string{"trunk-a", "trunk-b"}) {
			t.Fatalf("AoRs %v after a broken read", got)
		}
		db.exec("UPDATE ps_aors SET contact = 'sip:" + authed.addr + "' WHERE id = 'trunk-b'")
		eventually(t, 2*sourceRefresh+peerBound, "the source up again", func() bool { return sourceState(t, base).Up })
	})
	step(t, "4 the database stopped: the last good list kept, qualifyd_source_up 0", func() {
		db.stop()
		d.expect("source pbx-db: failed to connect to")
		_, metrics := get(t, "GET", base+"/metrics", "")
		for _, want := range []string{`qualifyd_source_up{source="pbx-db"} 0`, `qualifyd_source_aors{source="pbx-db"} 2`} {
			if !strings.Contains(metrics, want) {
				t.Fatalf("metrics lack %s", want)
			}
		}
		aors := listAoRs(t, base)
		if got := names(aors); !slices.Equal(got, []string{"trunk-a", "trunk-b"}) || aors[1].Contacts[0].Status != "Reachable" {
			t.Fatalf("AoRs %v after the database stopped: %+v", got, aors)
		}
		_, sources := get(t, "GET", base+"/api/v1/sources", "")
		for _, shown := range append(d.seen, sources) {
			if strings.Contains(shown, dbPassword) {
				t.Fatalf("the database password is shown: %s", shown)
			}
		}
	})
}

// reachable waits until aor's only contact is uri, Reachable.
func reachable(t *testing.T, base, aor, uri string) {
	t.Helper()
	eventually(t, 2*sourceRefresh+peerBound, aor+"'s contact "+uri+" Reachable", func() bool {
		for _, a := range listAoRs(t, base) {
			if a.Name == aor {
				return len(a.Contacts) == 1 && a.Contacts[0].URI == uri && a.Contacts[0].Status == "Reachable"
			}
		}
		return false
	})
}

// sourceState is the one source of GET /api/v1/sources.
func sourceState(t *testing.T, base string) api.Source {
	t.Helper()
	code, body := get(t, "GET", base+"/api/v1/sources", "")
	var list api.SourceList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Sources) != 1 {
		t.Fatalf("sources: %d %s", code, body)
	}
	return list.Sources[0]
}

// sipPeer answers OPTIONS on a loopback UDP socket with 200; with
// challenge, a request without credentials gets a 401 (realm "lab") and
// one with them a 200 when they are alice's with password "secret"
// (RFC 2617 qop=auth, MD5), a 403 otherwise.
type sipPeer struct {
	addr      string
	challenge bool
	mu        sync.Mutex
	from      string // the last From of an answered request
	answered  int    // challenged requests answered with valid credentials
}

func startSIPPeer(t *testing.T, challenge bool) *sipPeer {
	t.Helper()
	p := &sipPeer{challenge: challenge}
	p.addr = serveUDP(t, p.answer)
	return p
}

// serveUDP answers each datagram on a loopback UDP socket with answer's
// response ("" for none) until the test ends, and returns its address.
func serveUDP(t *testing.T, answer func(msg string) string) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, src, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := answer(string(buf[:n])); resp != "" {
				_, _ = c.WriteTo([]byte(resp), src)
			}
		}
	}()
	return c.LocalAddr().String()
}

// seen returns the last From answered and how many challenges were.
func (p *sipPeer) seen() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.from, p.answered
}

// compact maps RFC 3261's compact header names to the full ones.
var compact = map[string]string{"v": "via", "f": "from", "t": "to", "i": "call-id"}

// answer is the response to one request, "" for anything else.
func (p *sipPeer) answer(msg string) string {
	head, _, _ := strings.Cut(msg, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	method, uri, ok := strings.Cut(lines[0], " ")
	if !ok || method != "OPTIONS" {
		return ""
	}
	uri, _, _ = strings.Cut(uri, " ")
	var copied []string
	var from, auth string
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		if full, ok := compact[name]; ok {
			name = full
		}
		value = strings.TrimSpace(value)
		switch name {
		case "via", "from", "to", "call-id", "cseq":
			copied = append(copied, l)
		case "authorization":
			auth = value
		}
		if name == "from" {
			from = value
		}
	}
	code, extra := 200, ""
	switch {
	case p.challenge && auth == "":
		code, extra = 401, "WWW-Authenticate: Digest realm=\"lab\", nonce=\"n0nce\", qop=\"auth\", algorithm=MD5\r\n"
	case p.challenge && !validDigest(auth, uri):
		code = 403
	}
	p.mu.Lock()
	if code == 200 {
		p.from = from
		if p.challenge {
			p.answered++
		}
	}
	p.mu.Unlock()
	return fmt.Sprintf("SIP/2.0 %d X\r\n%s\r\n%sContent-Length: 0\r\n\r\n", code, strings.Join(copied, "\r\n"), extra)
}

// validDigest checks a digest response as RFC 2617 computes it.
func validDigest(value, uri string) bool {
	c, err := digest.ParseCredentials(value)
	if err != nil || c.Username != "alice" || c.Realm != "lab" || c.URI != uri || c.QOP != "auth" {
		return false
	}
	sum := func(s ...string) string {
		h := md5.Sum([]byte(strings.Join(s, ":")))
		return hex.EncodeToString(h[:])
	}
	return c.Response == sum(sum("alice", "lab", "secret"), "n0nce", fmt.Sprintf("%08x", c.Nc), c.Cnonce, "auth", sum("OPTIONS", uri))
}
