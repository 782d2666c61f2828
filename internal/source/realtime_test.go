package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// TestRealtimeRow: a row becomes the object Asterisk's sorcery builds
// from it: named by id, a NULL or empty column unset, a value split at
// ';' into several options with its "^3B" escapes decoded.
func TestRealtimeRow(t *testing.T) {
	cols := []string{"id", "contact", "qualify_frequency", "qualify_timeout", "outbound_proxy"}
	vals := [][]byte{[]byte("gw1"), []byte("sip:192.0.2.1:5060 ; sip:192.0.2.2^3Btransport=tcp;;"), []byte("60"), nil, []byte("")}
	got := rowObject(tables[0], cols, vals, 3)
	want := pjsip.Object{Type: "aor", Name: "gw1", File: "ps_aors", Line: 3, Options: []pjsip.KeyValue{
		{Key: "contact", Value: "sip:192.0.2.1:5060"}, {Key: "contact", Value: "sip:192.0.2.2;transport=tcp"},
		{Key: "qualify_frequency", Value: "60"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row\n got %+v\nwant %+v", got, want)
	}
	for in, want := range map[string][]string{
		"":              nil,
		" a ":           {"a"},
		"a;b":           {"a", "b"},
		"^3B^5e^zz^4":   {";^^zz^4"},
		"x^3b;^20y^20 ": {"x;", " y "},
	} {
		if got := chunks(in); !reflect.DeepEqual(got, want) {
			t.Errorf("chunks(%q) = %q, want %q", in, got, want)
		}
	}
}

// realtimeDB is a cluster with Asterisk's realtime tables (its Alembic
// migrations') in database asterisk, and a user qualifyd that may only SELECT from the three
// tables the driver reads.
func realtimeDB(t *testing.T) (*peertest.Postgres, string) {
	t.Helper()
	pg := peertest.StartRealtime(t, "rt-pass;w0rd")
	return pg, pg.DSN("qualifyd", "'rt-pass;w0rd'", "asterisk")
}

func realtimeSource(dsn string) *pjsip.Source {
	return &pjsip.Source{Name: "pbx-db", Driver: "realtime", DSN: pjsip.Secret(dsn), DSNFile: "realtime.dsn",
		Timeout: 10 * time.Second, RefreshInterval: time.Minute}
}

func readRealtime(t *testing.T, dsn string) ([]pjsip.Object, error) {
	t.Helper()
	return (&Keeper{}).read(context.Background(), realtimeSource(dsn))
}

// TestRealtimePostgres: the driver reads Asterisk's tables from a real
// PostgreSQL as a user with SELECT on them only: the columns it reads,
// with their values as text whatever their type, NULLs unset, other
// columns ignored; a value Asterisk's option would refuse fails the read
// naming table, row and column; and no error shows the password.
func TestRealtimePostgres(t *testing.T) {
	pg, dsn := realtimeDB(t)
	exec := func(sql string) { pg.Exec("asterisk", sql) }
	exec(realtimeRows)
	got, err := readRealtime(t, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, realtimeObjects) {
		t.Fatalf("objects\n got %+v\nwant %+v", got, realtimeObjects)
	}
	checkGarbage(t, exec, "ALTER TABLE ps_aors ALTER COLUMN qualify_frequency TYPE text", dsn)

	// A table the user may not read; a wrong password.
	pg.Exec("asterisk", "REVOKE SELECT ON ps_auths FROM qualifyd")
	_, err = readRealtime(t, dsn)
	if err == nil || !strings.HasPrefix(err.Error(), "ps_auths: ERROR: permission denied for table ps_auths") {
		t.Fatalf("no grant: %v", err)
	}
	_, err = readRealtime(t, pg.DSN("qualifyd", "wr0ng-pass", "asterisk"))
	if err == nil || !strings.Contains(err.Error(), `password authentication failed for user "qualifyd"`) {
		t.Fatalf("wrong password: %v", err)
	}
	noSecret(t, err, "wr0ng-pass")
}

// checkGarbage: with realtimeRows in the database, a column retyped to
// text (as some installations have it) holding what Asterisk's option
// refuses fails the read naming table, row and column, as does a contact
// that is no SIP URI.
func checkGarbage(t *testing.T, exec func(sql string), retype, dsn string) {
	t.Helper()
	exec(retype + "; UPDATE ps_aors SET qualify_frequency = 'abc' WHERE id = 'trunk-b'")
	_, err := readRealtime(t, dsn)
	if want := `ps_aors:2: section "trunk-b": option "qualify_frequency": invalid value: "abc" is not an unsigned integer`; err == nil || err.Error() != want {
		t.Fatalf("garbage: got %v, want %s", err, want)
	}
	exec(`UPDATE ps_aors SET qualify_frequency = '60', contact = 'trunk-b.example.net' WHERE id = 'trunk-b'`)
	_, err = readRealtime(t, dsn)
	if err == nil || !strings.HasPrefix(err.Error(), `ps_aors:2: section "trunk-b": option "contact": `) {
		t.Fatalf("a contact that is no SIP URI: %v", err)
	}
}

// noSecret fails the test when err shows secret.
func noSecret(t *testing.T, err error, secret string) {
	t.Helper()
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// TestRealtimeSecret: neither a DSN that does not parse nor a database
// that cannot be reached shows the password, in either DSN form.
func TestRealtimeSecret(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, dsn := range []string{
		"postgres://qualifyd:hunter2-pw@db.example.net:54x2/asterisk",
		"host=db.example.net port=x password=hunter2-pw",
		fmt.Sprintf("postgres://qualifyd:hunter2-pw@127.0.0.1:%d/asterisk?connect_timeout=5", closed),
		fmt.Sprintf("host=127.0.0.1 port=%d user=qualifyd password=hunter2-pw dbname=asterisk", closed),
	} {
		_, err := readRealtime(t, dsn)
		if err == nil {
			t.Fatalf("%s: no error", dsn)
		}
		noSecret(t, err, "hunter2-pw")
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: the error is not one line: %q", dsn, err)
		}
	}
}

// TestRealtimeStall: a database that accepts the connection and never
// answers (PostgreSQL's, or MySQL's that never sends its greeting) fails
// the read within the source's timeout, in every DSN form; it does not
// hang, and the error does not show the password.
func TestRealtimeStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	for _, dsn := range []string{"postgres://qualifyd:stall-pw@" + ln.Addr().String() + "/asterisk?sslmode=disable",
		"mysql://qualifyd:stall-pw@" + ln.Addr().String() + "/asterisk",
		fmt.Sprintf("qualifyd:stall-pw@tcp(%s)/asterisk", ln.Addr())} {
		src := realtimeSource(dsn)
		src.Timeout = 200 * time.Millisecond
		d, err := New(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Read(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: got %v, want a timeout", dsn, err)
		}
		noSecret(t, err, "stall-pw")
	}
}
