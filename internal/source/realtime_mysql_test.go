package source

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// realtimeRows are rows of the three tables, in columns that both
// databases' Alembic schemas have, among them ones qualifyd does not
// read.
const realtimeRows = `
	INSERT INTO ps_aors (id, contact, qualify_frequency, qualify_timeout, authenticate_qualify, max_contacts, remove_existing)
		VALUES ('trunk-b', 'sip:192.0.2.20:5060', 30, 2.5, 'no', 1, 'yes'),
		       ('trunk-a', 'sip:192.0.2.10:5060;sip:192.0.2.11:5080', NULL, NULL, NULL, NULL, NULL);
	INSERT INTO ps_endpoints (id, transport, aors, context, allow, direct_media, dtmf_mode, outbound_auth, from_user, from_domain)
		VALUES ('trunk-a', 'transport-udp', 'trunk-a', 'from-trunk', 'ulaw,alaw', 'no', 'rfc4733', 'trunk-a-auth', 'pbx', 'pbx.example.net');
	INSERT INTO ps_auths (id, auth_type, username, password, realm, md5_cred)
		VALUES ('trunk-a-auth', 'userpass', 'alice', 'secret', NULL, NULL)`

// realtimeObjects are the objects realtimeRows become.
var realtimeObjects = []pjsip.Object{
	{Type: "aor", Name: "trunk-a", File: "ps_aors", Line: 1, Options: kv("contact", "sip:192.0.2.10:5060", "contact", "sip:192.0.2.11:5080")},
	{Type: "aor", Name: "trunk-b", File: "ps_aors", Line: 2, Options: kv("contact", "sip:192.0.2.20:5060",
		"qualify_frequency", "30", "qualify_timeout", "2.5", "authenticate_qualify", "no")},
	{Type: "endpoint", Name: "trunk-a", File: "ps_endpoints", Line: 1, Options: kv("aors", "trunk-a", "transport", "transport-udp",
		"from_user", "pbx", "from_domain", "pbx.example.net", "outbound_auth", "trunk-a-auth")},
	{Type: "auth", Name: "trunk-a-auth", File: "ps_auths", Line: 1, Options: kv("username", "alice", "password", "secret")},
}

func kv(pairs ...string) []pjsip.KeyValue {
	var out []pjsip.KeyValue
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, pjsip.KeyValue{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// TestRealtimeMariaDB: the driver reads Asterisk's tables, made by its
// Alembic migrations, from a real MariaDB as a user with SELECT on them
// only, through a mysql:// URL and go-sql-driver's own form: the columns
// it reads, with their values as text whatever their type, NULLs unset,
// other columns ignored; a value Asterisk's option would refuse fails the
// read naming table, row and column; and no error shows the password.
func TestRealtimeMariaDB(t *testing.T) {
	const pw = "rt-pass;w0rd@/?"
	m := peertest.StartRealtimeMariaDB(t, pw)
	m.Exec("asterisk", realtimeRows)
	for _, dsn := range []string{m.DSN("qualifyd", pw, "asterisk"), "qualifyd:" + pw + "@unix(" + m.Socket + ")/asterisk"} {
		got, err := readRealtime(t, dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if !reflect.DeepEqual(got, realtimeObjects) {
			t.Fatalf("objects\n got %+v\nwant %+v", got, realtimeObjects)
		}
	}
	dsn := m.DSN("qualifyd", pw, "asterisk")

	checkGarbage(t, func(sql string) { m.Exec("asterisk", sql) }, "ALTER TABLE ps_aors MODIFY qualify_frequency VARCHAR(40)", dsn)

	m.Exec("asterisk", "REVOKE SELECT ON asterisk.ps_auths FROM qualifyd@localhost")
	_, err := readRealtime(t, dsn)
	if err == nil || !strings.HasPrefix(err.Error(), "ps_auths: Error 1142 (42000): SELECT command denied to user 'qualifyd'@'localhost' for table") {
		t.Fatalf("no grant: %v", err)
	}
	for _, wrong := range []string{m.DSN("qualifyd", "wr0ng-pass", "asterisk"), "qualifyd:wr0ng-pass@unix(" + m.Socket + ")/asterisk"} {
		_, err = readRealtime(t, wrong)
		if err == nil || !strings.Contains(err.Error(), "Access denied for user 'qualifyd'@'localhost' (using password: YES)") {
			t.Fatalf("wrong password: %v", err)
		}
		noSecret(t, err, "wr0ng-pass")
	}
}

// TestRealtimeSnapshot: the three tables are read in one snapshot: rows
// committed after it began are not seen, even by a later table's query.
func TestRealtimeSnapshot(t *testing.T) {
	m := peertest.StartRealtimeMariaDB(t, "snap-pw")
	m.Exec("asterisk", realtimeRows)
	db, err := newDatabase(m.DSN("qualifyd", "snap-pw", "asterisk"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	snap, err := db.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.close()
	aors, err := readTable(ctx, snap, tables[0])
	if err != nil || len(aors) != 2 {
		t.Fatalf("ps_aors: %v %v", aors, err)
	}
	m.Exec("asterisk", "INSERT INTO ps_auths (id, username, password) VALUES ('late', 'bob', 'x'); DELETE FROM ps_endpoints")
	for _, tb := range tables[1:] {
		objs, err := readTable(ctx, snap, tb)
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s after a commit: %v %v, want the snapshot's one row", tb.name, objs, err)
		}
	}
}

// TestRealtimeSameRows: the same rows in PostgreSQL and in MariaDB, each
// with the schema Asterisk's Alembic migrations make for it, give the
// same objects.
func TestRealtimeSameRows(t *testing.T) {
	pg := peertest.StartRealtime(t, "same-pw")
	pg.Exec("asterisk", realtimeRows)
	m := peertest.StartRealtimeMariaDB(t, "same-pw")
	m.Exec("asterisk", realtimeRows)
	fromPG, err := readRealtime(t, pg.DSN("qualifyd", "same-pw", "asterisk"))
	if err != nil {
		t.Fatal(err)
	}
	fromMariaDB, err := readRealtime(t, m.DSN("qualifyd", "same-pw", "asterisk"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromPG, fromMariaDB) || !reflect.DeepEqual(fromPG, realtimeObjects) {
		t.Fatalf("PostgreSQL\n %+v\nMariaDB\n %+v\nwant\n %+v", fromPG, fromMariaDB, realtimeObjects)
	}
}

// TestRealtimeMySQLDSN: which database a DSN names, and what of it the
// MySQL driver takes: the address (a socket, a port defaulted to 3306),
// the user, password and database, go-sql-driver's parameters, the TLS
// files; an error never quotes the DSN.
func TestRealtimeMySQLDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, net, addr, user, pw, db string
	}{
		{"mysql://qualifyd:p%40ss@db.example.net/asterisk", "tcp", "db.example.net:3306", "qualifyd", "p@ss", "asterisk"},
		{"mysql://qualifyd:pw@[2001:db8::1]:3307/asterisk?timeout=3s", "tcp", "[2001:db8::1]:3307", "qualifyd", "pw", "asterisk"},
		{"mysql://qualifyd:pw@/asterisk?socket=/run/mysqld/mysqld.sock", "unix", "/run/mysqld/mysqld.sock", "qualifyd", "pw", "asterisk"},
		{"qualifyd:p@ss)@tcp(db.example.net:3306)/asterisk?tls=skip-verify", "tcp", "db.example.net:3306", "qualifyd", "p@ss)", "asterisk"},
		{"qualifyd:pw@unix(/run/mysqld/mysqld.sock)/asterisk", "unix", "/run/mysqld/mysqld.sock", "qualifyd", "pw", "asterisk"},
	} {
		db, err := newDatabase(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		c := db.(*mysqlDB).cfg
		if c.Net != tc.net || c.Addr != tc.addr || c.User != tc.user || c.Passwd != tc.pw || c.DBName != tc.db {
			t.Errorf("%s: %s %s %s %s %s", tc.dsn, c.Net, c.Addr, c.User, c.Passwd, c.DBName)
		}
	}
	for _, dsn := range []string{"postgres://u:pw@h/db", "host=/tmp user=u password=pw dbname=x", "dbname=tcp(x)"} {
		if _, err := newDatabase(dsn); err != nil || reflect.TypeOf(must(newDatabase(dsn))) != reflect.TypeOf(&postgres{}) {
			t.Errorf("%s: not PostgreSQL: %v", dsn, err)
		}
	}
	for dsn, want := range map[string]string{
		"mysql://u:hunter2-pw@h:x/db":                       "not a MySQL connection string",
		"mysql://u:hunter2-pw@h/db?socket=/s":               "a mysql:// URL has a host or ?socket=, not both",
		"mysql://u:hunter2-pw@h/db?tls=bogus":               "not a MySQL connection string",
		"mysql://u:hunter2-pw@h/db?ssl-ca=/nonexistent.pem": "ssl-ca: open /nonexistent.pem: no such file or directory",
		"mysql://u:hunter2-pw@h/db?ssl-cert=/c.pem":         "ssl-cert and ssl-key go together",
		"u:hunter2-pw@tcp(h)/db?ssl-ca=%2Fx&tls=false":      "ssl-ca, ssl-cert and ssl-key need tls=true or tls=skip-verify, not tls=false",
		"u:hunter2-pw@tcp(h/db":                             "not a MySQL connection string",
	} {
		_, err := newDatabase(dsn)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2-pw") {
			t.Errorf("%s: got %v, want %s", dsn, err, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRealtimeMariaDBTLS: over TCP to a MariaDB that requires TLS (and
// then a client certificate) of user qualifyd, a read with tls=true and
// ssl-ca naming the server's CA succeeds, as does one with ssl-cert and
// ssl-key when the certificate is required; without TLS, with the
// system's roots instead of the CA, or without the client certificate
// the read fails, and no error shows the password.
func TestRealtimeMariaDBTLS(t *testing.T) {
	const pw = "tls-pw"
	certs := peertest.WriteCerts(t)
	m := peertest.StartRealtimeMariaDB(t, pw)
	m.Exec("asterisk", realtimeRows+"; ALTER USER qualifyd@localhost REQUIRE SSL")
	m.Stop()
	m.Port = peertest.FreePort(t, "tcp")
	m.Args = []string{"--ssl-ca=" + certs.CA, "--ssl-cert=" + certs.ServerCert, "--ssl-key=" + certs.ServerKey}
	m.Start()
	m.Exec("", "RENAME USER qualifyd@localhost TO qualifyd@'127.0.0.1'")
	base := fmt.Sprintf("mysql://qualifyd:%s@127.0.0.1:%d/asterisk", pw, m.Port)
	read := func(dsn string) error {
		got, err := readRealtime(t, dsn)
		if err == nil && !reflect.DeepEqual(got, realtimeObjects) {
			t.Fatalf("%s: objects %+v", dsn, got)
		}
		if err != nil {
			noSecret(t, err, pw)
		}
		return err
	}
	if err := read(base + "?tls=true&ssl-ca=" + certs.CA); err != nil {
		t.Fatalf("TLS with the server's CA: %v", err)
	}
	if err := read(fmt.Sprintf("qualifyd:%s@tcp(127.0.0.1:%d)/asterisk?ssl-ca=%s", pw, m.Port, url.QueryEscape(certs.CA))); err != nil {
		t.Fatalf("ssl-ca alone, go-sql-driver's form: %v", err)
	}
	if err := read(base); err == nil || !strings.Contains(err.Error(), "Access denied for user 'qualifyd'") {
		t.Fatalf("without TLS: %v", err)
	}
	if err := read(base + "?tls=true"); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("the system's roots: %v", err)
	}
	m.Exec("", "ALTER USER qualifyd@'127.0.0.1' REQUIRE X509")
	if err := read(base + "?ssl-ca=" + certs.CA); err == nil || !strings.Contains(err.Error(), "Access denied for user 'qualifyd'") {
		t.Fatalf("no client certificate: %v", err)
	}
	if err := read(base + "?ssl-ca=" + certs.CA + "&ssl-cert=" + certs.ClientCert + "&ssl-key=" + certs.ClientKey); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
}

// FuzzRealtimeDSN: no connection string, in any of the forms, makes the
// parsers panic, and none of their errors shows the password (a string
// the rest of the DSN does not hold).
func FuzzRealtimeDSN(f *testing.F) {
	for _, rest := range []string{"db.example.net/asterisk", "h:x/db", "/db?socket=/run/mysqld.sock", "h/db?tls=bogus",
		"h/db?ssl-ca=/nonexistent&tls=false", "127.0.0.1:3306)/asterisk?timeout=3s", "unix(/s)/db?ssl-cert=%2Fc", "[::1]:5432/db?sslmode=verify-full",
		"h/db?ssl-key=/k&ssl-cert=/c", "%zz", ")/?", ""} {
		f.Add([]byte{0x5e, 0xa1}, rest)
	}
	f.Fuzz(func(t *testing.T, secret []byte, rest string) {
		pw := "Zq9" + hex.EncodeToString(secret)
		if strings.Contains(rest, pw) {
			return
		}
		for _, dsn := range []string{"mysql://qualifyd:" + url.QueryEscape(pw) + "@" + rest, "qualifyd:" + pw + "@tcp(" + rest,
			"qualifyd:" + pw + "@" + rest, "postgres://qualifyd:" + url.QueryEscape(pw) + "@" + rest, "password=" + pw + " " + rest} {
			if _, err := newDatabase(dsn); err != nil && strings.Contains(err.Error(), pw) {
				t.Fatalf("%q: the error shows the password: %v", dsn, err)
			}
		}
	})
}
