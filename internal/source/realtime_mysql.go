package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// mysqlDB is a MySQL or MariaDB database, read with go-sql-driver/mysql.
type mysqlDB struct{ cfg *mysql.Config }

// errMySQLDSN is a MySQL DSN that does not parse; it never quotes the
// DSN.
var errMySQLDSN = errors.New("not a MySQL connection string (mysql://USER:PASSWORD@HOST:PORT/DATABASE, " +
	"mysql://USER:PASSWORD@/DATABASE?socket=PATH, or USER:PASSWORD@tcp(HOST:PORT)/DATABASE)")

// dsnForm matches go-sql-driver's own DSN form,
// [USER[:PASSWORD]@]tcp(ADDRESS)/DATABASE or unix(PATH).
var dsnForm = regexp.MustCompile(`^(.*@)?(tcp|tcp4|tcp6|unix)\(`)

// isMySQL reports whether dsn names a MySQL or MariaDB database: a
// mysql:// URL or go-sql-driver's form. libpq's key=value pairs and
// postgres:// URLs have neither.
func isMySQL(dsn string) bool {
	return strings.HasPrefix(dsn, "mysql://") || dsnForm.MatchString(dsn)
}

// tlsFiles are the DSN parameters, named as the mysql client's options,
// that qualifyd reads itself: go-sql-driver would send them to the
// server as system variables.
var tlsFiles = []string{"ssl-ca", "ssl-cert", "ssl-key"}

// newMySQL parses a mysql:// URL or go-sql-driver's DSN form; the
// parameters are go-sql-driver's (tls=true, skip-verify, preferred or
// false; timeout, ...) and tlsFiles.
func newMySQL(dsn string) (database, error) {
	var cfg *mysql.Config
	var files url.Values
	var err error
	if strings.HasPrefix(dsn, "mysql://") {
		cfg, files, err = parseMySQLURL(dsn)
	} else {
		cfg, files, err = parseMySQLDSN(dsn)
	}
	if err != nil {
		return nil, err
	}
	if err := applyTLSFiles(cfg, files); err != nil {
		return nil, err
	}
	// Each value as text, as res_config_mysql and res_config_odbc read
	// it; nothing of the driver's own goes to the daemon's output.
	cfg.ParseTime = false
	cfg.Logger = &mysql.NopLogger{}
	cfg.MultiStatements = false
	if _, err := mysql.NewConnector(cfg); err != nil {
		return nil, errMySQLDSN
	}
	return &mysqlDB{cfg: cfg}, nil
}

// parseMySQLURL reads mysql://USER:PASSWORD@HOST[:PORT]/DATABASE?PARAMS,
// the host a Unix socket with ?socket=PATH.
func parseMySQLURL(dsn string) (*mysql.Config, url.Values, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" || u.Fragment != "" {
		return nil, nil, errMySQLDSN
	}
	q := u.Query()
	files := takeTLSFiles(q)
	socket := q.Get("socket")
	q.Del("socket")
	cfg, err := mysql.ParseDSN("/?" + q.Encode())
	if err != nil {
		return nil, nil, errMySQLDSN
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.Net, cfg.Addr = "tcp", u.Host
	switch {
	case socket != "" && u.Host != "":
		return nil, nil, errors.New("a mysql:// URL has a host or ?socket=, not both")
	case socket != "":
		cfg.Net, cfg.Addr = "unix", socket
	case u.Host == "":
		cfg.Addr = "localhost"
	}
	if cfg.Net == "tcp" {
		cfg.Addr = withPort(cfg.Addr)
	}
	// Computed again for this address by NewConnector (the server's name).
	cfg.TLS = nil
	return cfg, files, nil
}

// withPort is addr with MySQL's port 3306 when it has none.
func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), "3306")
}

// parseMySQLDSN reads go-sql-driver's form. As go-sql-driver reads it,
// the parameters follow the last '/' (a '/' in their values is written
// %2F), the password may hold any character.
func parseMySQLDSN(dsn string) (*mysql.Config, url.Values, error) {
	slash := strings.LastIndexByte(dsn, '/')
	base, query := dsn, ""
	if i := strings.IndexByte(dsn[slash+1:], '?'); i >= 0 {
		base, query = dsn[:slash+1+i], dsn[slash+2+i:]
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, nil, errMySQLDSN
	}
	files := takeTLSFiles(q)
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		return nil, nil, errMySQLDSN
	}
	cfg.TLS = nil
	return cfg, files, nil
}

// takeTLSFiles removes tlsFiles from q and returns them.
func takeTLSFiles(q url.Values) url.Values {
	files := url.Values{}
	for _, k := range tlsFiles {
		if v, ok := q[k]; ok {
			files[k] = v
			q.Del(k)
		}
	}
	return files
}

// applyTLSFiles sets cfg's TLS from ssl-ca (the server's certificate is
// checked against it instead of the system's roots) and ssl-cert with
// ssl-key (qualifyd's client certificate). Either turns TLS on, with the
// server's name checked unless tls=skip-verify.
func applyTLSFiles(cfg *mysql.Config, files url.Values) error {
	if len(files) == 0 {
		return nil
	}
	if cfg.TLSConfig == "false" || cfg.TLSConfig == "preferred" {
		return fmt.Errorf("ssl-ca, ssl-cert and ssl-key need tls=true or tls=skip-verify, not tls=%s", cfg.TLSConfig)
	}
	c := &tls.Config{InsecureSkipVerify: cfg.TLSConfig == "skip-verify"}
	if host, _, err := net.SplitHostPort(cfg.Addr); err == nil && !c.InsecureSkipVerify {
		c.ServerName = host
	}
	if ca := files.Get("ssl-ca"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("ssl-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("ssl-ca: %s holds no PEM certificate", ca)
		}
	}
	cert, key := files.Get("ssl-cert"), files.Get("ssl-key")
	if (cert == "") != (key == "") {
		return errors.New("ssl-cert and ssl-key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fmt.Errorf("ssl-cert, ssl-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = c
	return nil
}

func (m *mysqlDB) password() string { return m.cfg.Passwd }

// begin opens a REPEATABLE READ transaction WITH CONSISTENT SNAPSHOT,
// READ ONLY on one connection: InnoDB takes its snapshot at the START,
// and every query after it reads that state. database/sql keeps no idle
// connection (SetMaxIdleConns(0)): closing the snapshot disconnects.
func (m *mysqlDB) begin(ctx context.Context) (snapshot, error) {
	connector, err := mysql.NewConnector(m.cfg)
	if err != nil {
		return nil, errMySQLDSN
	}
	db := sql.OpenDB(connector)
	db.SetMaxIdleConns(0)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("failed to connect to %s(%s) as %s: %w", m.cfg.Net, m.cfg.Addr, m.cfg.User, err)
	}
	s := &mySnapshot{db: db, conn: conn}
	for _, stmt := range []string{"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// mySnapshot is one MySQL transaction on its own connection.
type mySnapshot struct {
	db   *sql.DB
	conn *sql.Conn
}

// query reads the rows with the text protocol (a query without
// arguments): every value is the text the server prints for it.
func (s *mySnapshot) query(ctx context.Context, q string, row func([][]byte)) ([]string, error) {
	rows, err := s.conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	raw := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range raw {
		dest[i] = &raw[i]
	}
	vals := make([][]byte, len(cols))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		for i, r := range raw {
			vals[i] = r
		}
		row(vals)
	}
	return cols, rows.Err()
}

// quote is name in backquotes, a backquote in it doubled.
func (s *mySnapshot) quote(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// close disconnects, which ends the transaction on the server: no
// ROLLBACK is sent, which could wait on a server that stopped answering.
func (s *mySnapshot) close() {
	s.conn.Close()
	s.db.Close()
}
