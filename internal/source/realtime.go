package source

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// table is one of Asterisk's realtime tables as the realtime driver reads
// it: the type of object its rows become, and the columns read, each
// passed as the option of the same name (as Asterisk's sorcery does).
type table struct {
	name, typ string
	columns   []string
}

// tables are the tables read, with Asterisk's names and the columns
// qualifyd's reader uses (contrib/ast-db-manage's schema). Other columns
// are not read, and a column that an older schema lacks is an unset
// option.
var tables = []table{
	{"ps_aors", "aor", []string{"contact", "qualify_frequency", "qualify_timeout", "qualify_2xx_only",
		"authenticate_qualify", "outbound_proxy"}},
	{"ps_endpoints", "endpoint", []string{"aors", "transport", "outbound_proxy", "from_user", "from_domain",
		"outbound_auth"}},
	{"ps_auths", "auth", []string{"username", "password", "realm"}},
}

// idColumn names each row's object.
const idColumn = "id"

// realtime reads Asterisk's realtime tables in PostgreSQL, MySQL or
// MariaDB: which one follows from the DSN (newDatabase).
type realtime struct {
	src *pjsip.Source
	db  database
}

// database is one kind of database the realtime driver reads
// (realtime_postgres.go, realtime_mysql.go).
type database interface {
	// begin connects and opens a read-only snapshot of the database:
	// every query of the snapshot sees the same committed state.
	begin(ctx context.Context) (snapshot, error)
	// password is the DSN's password, "" for none.
	password() string
}

// snapshot is one open read-only transaction.
type snapshot interface {
	// query runs sql and calls row with each row's values as the text
	// the server sends, nil for a NULL; it returns the result's columns.
	query(ctx context.Context, sql string, row func(vals [][]byte)) ([]string, error)
	// quote is name as an identifier of the database's SQL.
	quote(name string) string
	// close ends the transaction and the connection.
	close()
}

// newRealtime parses the source's DSN. Its error names the DSN's file,
// never its content: the drivers' own parse errors may quote it.
func newRealtime(s *pjsip.Source) (Driver, error) {
	db, err := newDatabase(s.DSN.Reveal())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.DSNFile, err)
	}
	return &realtime{src: s, db: db}, nil
}

// newDatabase is the database a DSN names: MySQL or MariaDB for a
// mysql:// URL or go-sql-driver's form (isMySQL), PostgreSQL otherwise.
func newDatabase(dsn string) (database, error) {
	if isMySQL(dsn) {
		return newMySQL(dsn)
	}
	return newPostgres(dsn)
}

// Read reads the three tables in one read-only snapshot, within the
// source's timeout; the Keeper checks the values it returns.
func (d *realtime) Read(ctx context.Context) ([]pjsip.Object, error) {
	objs, err := d.read(ctx)
	if err != nil {
		return nil, d.redact(err)
	}
	return objs, nil
}

func (d *realtime) read(ctx context.Context) ([]pjsip.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, d.src.Timeout)
	defer cancel()
	snap, err := d.db.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.close()
	out := []pjsip.Object{}
	for _, t := range tables {
		objs, err := readTable(ctx, snap, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// readTable reads the rows of t, ordered by id, as objects.
func readTable(ctx context.Context, snap snapshot, t table) ([]pjsip.Object, error) {
	cols, err := columnsOf(ctx, snap, t)
	if err != nil {
		return nil, err
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = snap.quote(c)
	}
	var out []pjsip.Object
	_, err = snap.query(ctx, "SELECT "+strings.Join(quoted, ", ")+" FROM "+snap.quote(t.name)+
		" ORDER BY "+snap.quote(idColumn), func(vals [][]byte) {
		out = append(out, rowObject(t, cols, vals, len(out)+1))
	})
	return out, err
}

// columnsOf returns id and those of t's columns the table has, in t's
// order.
func columnsOf(ctx context.Context, snap snapshot, t table) ([]string, error) {
	names, err := snap.query(ctx, "SELECT * FROM "+snap.quote(t.name)+" LIMIT 0", func([][]byte) {})
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	if !has[idColumn] {
		return nil, fmt.Errorf("no column %q", idColumn)
	}
	cols := []string{idColumn}
	for _, c := range t.columns {
		if has[c] {
			cols = append(cols, c)
		}
	}
	return cols, nil
}

// rowObject is the object one row becomes, at line (its place in the
// table ordered by id): named by its id column, each other column an
// option, a value split as Asterisk's res_config_pgsql, res_config_odbc
// and res_config_mysql split it (chunks), a NULL or empty one unset.
func rowObject(t table, cols []string, vals [][]byte, line int) pjsip.Object {
	o := pjsip.Object{Type: t.typ, File: t.name, Line: line}
	for i, c := range cols {
		if c == idColumn {
			o.Name = string(vals[i])
			continue
		}
		if vals[i] == nil {
			continue
		}
		for _, v := range chunks(string(vals[i])) {
			o.Options = append(o.Options, pjsip.KeyValue{Key: c, Value: v})
		}
	}
	return o
}

// chunks splits a column's value as res_config_pgsql does (and
// res_config_odbc, through which most MySQL realtime is read): at each ';',
// each part stripped of blanks, then each "^XX" (two hexadecimal digits)
// decoded to its byte (ast_realtime_decode_chunk: a ';' in a value is
// written "^3B"), empty parts dropped.
func chunks(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ";") {
		if part = decodeChunk(strings.Trim(part, " \t\n\v\f\r")); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// decodeChunk decodes the "^XX" escapes of one part.
func decodeChunk(s string) string {
	if !strings.Contains(s, "^") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '^' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// redact returns err on one line with the DSN and its password, as
// written and as URL-escaped, replaced: the drivers' errors name the
// host, user and database, and no error of qualifyd may show the password.
func (d *realtime) redact(err error) error {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	pw := d.db.password()
	for _, s := range []string{d.src.DSN.Reveal(), pw, url.PathEscape(pw), url.QueryEscape(pw)} {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "(secret)")
		}
	}
	return &redacted{msg: msg, err: err}
}

// redacted is an error shown as msg, which still matches err's sentinels
// (errors.Is(err, context.DeadlineExceeded)).
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
