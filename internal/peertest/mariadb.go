package peertest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is a MariaDB server of one test (StartRealtimeMariaDB): its
// own data directory in a directory of the test's, listening only on the
// Unix socket Socket (no network). The administrator root@localhost logs
// in with AdminPassword.
type MariaDB struct {
	// Dir holds the socket and the data directory.
	Dir string
	// Socket is the server's Unix socket.
	Socket string
	// Log is the server's output.
	Log *Output
	// Port, when not 0, is a loopback TCP port the next Start listens
	// on besides the socket; Args are more server options for it (for
	// example --ssl-cert=FILE).
	Port int
	Args []string

	t     testing.TB
	cmd   *exec.Cmd
	ended chan struct{}
}

// mariadbBin finds program (mariadb-install-db, mariadbd) on PATH or in
// /usr/sbin and /usr/bin, where Debian's mariadb-server puts them.
func mariadbBin(t testing.TB, program string) string {
	t.Helper()
	for _, p := range []string{program, "/usr/sbin/" + program, "/usr/bin/" + program} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatalf("MariaDB is not installed (make deps installs Debian's mariadb-server): no %s", program)
	return ""
}

// serverArgs are the options of every server run: no option file, small
// and unsynced InnoDB files (a test's data need not survive a crash),
// no host name lookups; root runs it as root, which mariadbd otherwise
// refuses.
func serverArgs(data string) []string {
	args := []string{"--no-defaults", "--datadir=" + data, "--skip-name-resolve",
		"--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=0",
		"--innodb-doublewrite=0"}
	if os.Geteuid() == 0 {
		args = append(args[:1], append([]string{"--user=root"}, args[1:]...)...)
	}
	return args
}

// newMariaDB is a server in dir, not yet started.
func newMariaDB(t testing.TB, dir string) *MariaDB {
	t.Helper()
	m := &MariaDB{Dir: dir, Socket: filepath.Join(dir, "mysqld.sock"), t: t}
	t.Cleanup(m.kill)
	return m
}

func (m *MariaDB) data() string { return filepath.Join(m.Dir, "data") }

// installMariaDB creates the system tables in data, root@localhost with
// a password (empty until mariadbTemplate sets it) rather than Unix socket
// authentication, which go-sql-driver does not speak.
func installMariaDB(t testing.TB, data string) {
	t.Helper()
	args := append(serverArgs(data)[:1], "--auth-root-authentication-method=normal", "--skip-test-db")
	args = append(args, serverArgs(data)[1:]...)
	cmd := exec.Command(mariadbBin(t, "mariadb-install-db"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
}

// Start starts the server (again, after Stop) and waits until it
// accepts root.
func (m *MariaDB) Start() {
	m.t.Helper()
	m.Log = &Output{}
	args := append(serverArgs(m.data()), "--socket="+m.Socket, "--pid-file="+filepath.Join(m.Dir, "mysqld.pid"), "--log-error=")
	if m.Port == 0 {
		args = append(args, "--skip-networking")
	} else {
		args = append(args, "--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", m.Port))
	}
	args = append(args, m.Args...)
	m.cmd = exec.Command(mariadbBin(m.t, "mariadbd"), args...)
	m.cmd.Dir = m.Dir
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m.cmd.Stdout, m.cmd.Stderr = m.Log, m.Log
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start mariadbd: %v", err)
	}
	m.ended = make(chan struct{})
	go func(cmd *exec.Cmd, ended chan struct{}) { _ = cmd.Wait(); close(ended) }(m.cmd, m.ended)
	err := awaitUp(60*time.Second, m.ended, func(ctx context.Context) error {
		db, err := m.open("")
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
	switch {
	case errors.Is(err, errExited):
		m.t.Fatalf("mariadbd exited:\n%s", m.Log)
	case err != nil:
		m.t.Fatalf("mariadbd did not accept connections on %s: %v\n%s", m.Socket, err, m.Log)
	}
}

// open is a handle on database as root: its password is AdminPassword,
// or none on a data directory mariadbTemplate has not finished.
func (m *MariaDB) open(database string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "unix", m.Socket, database
	cfg.MultiStatements, cfg.Logger = true, &mysql.NopLogger{}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	if db.PingContext(context.Background()) == nil {
		return db, nil
	}
	db.Close()
	cfg.Passwd = AdminPassword
	if c, err = mysql.NewConnector(cfg); err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// Stop shuts the server down (SIGTERM: a clean shutdown) and waits until
// it has exited.
func (m *MariaDB) Stop() {
	m.t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		m.t.Fatalf("stop mariadbd: %v", err)
	}
	select {
	case <-m.ended:
	case <-time.After(60 * time.Second):
		m.t.Fatalf("mariadbd did not stop:\n%s", m.Log)
	}
}

// kill ends the server's process group, at the test's end.
func (m *MariaDB) kill() {
	if m.cmd == nil {
		return
	}
	select {
	case <-m.ended:
		return
	default:
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.ended
	if m.t.Failed() {
		m.t.Logf("mariadbd output:\n%s", m.Log)
	}
}

// DSN is the mysql:// URL of user to database on the socket, the
// password URL-escaped.
func (m *MariaDB) DSN(user, password, database string) string {
	return fmt.Sprintf("mysql://%s@/%s?socket=%s", url.UserPassword(user, password).String(), database, m.Socket)
}

// Exec runs sql (statements separated by ';') as root in database ("":
// none).
func (m *MariaDB) Exec(database, sql string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := m.open(database)
	if err != nil {
		m.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, sql); err != nil {
		m.t.Fatalf("%s: %v", strings.TrimSpace(sql), err)
	}
}

// StartRealtimeMariaDB starts a server whose database "asterisk" holds
// the tables Asterisk's Alembic migrations make (AlembicSchema), and a
// user "qualifyd"@"localhost" with password that may only SELECT from
// ps_aors, ps_endpoints and ps_auths: the grants docs/sources.md asks of a
// realtime source's user. Applying the migrations takes MariaDB about
// 20 s, so their result is made once per schema and MariaDB version, in
// a data directory kept in qualifyd's cache (mariadbTemplate), and each
// server starts on a copy of it.
func StartRealtimeMariaDB(t testing.TB, password string) *MariaDB {
	t.Helper()
	template := mariadbTemplate(t, AlembicSchema(t, "mysql"))
	m := newMariaDB(t, t.TempDir())
	if err := os.CopyFS(m.data(), os.DirFS(template)); err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Exec("asterisk", "CREATE USER qualifyd@localhost IDENTIFIED BY "+quote(password)+"; "+
		"GRANT SELECT ON asterisk.ps_aors TO qualifyd@localhost; GRANT SELECT ON asterisk.ps_endpoints TO qualifyd@localhost; "+
		"GRANT SELECT ON asterisk.ps_auths TO qualifyd@localhost")
	return m
}

// mariadbTemplate is a data directory, stopped cleanly, holding the
// database asterisk made by schema, and root with AdminPassword: in
// ${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd/mariadb-HASH, HASH covering
// the schema and the server's version, made when it is not there (in a
// directory of its own, renamed into place once complete).
func mariadbTemplate(t testing.TB, schema string) string {
	t.Helper()
	version, err := exec.Command(mariadbBin(t, "mariadbd"), "--version").Output()
	if err != nil {
		t.Fatalf("mariadbd --version: %v", err)
	}
	sum := sha256.Sum256([]byte(string(version) + "\x00" + schema))
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "qualifyd", "mariadb-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "asterisk")); err == nil {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// Built beside its place, so that the rename stays on one file system.
	build, err := os.MkdirTemp(filepath.Dir(dir), ".mariadb-build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(build)
	m := newMariaDB(t, build)
	installMariaDB(t, m.data())
	m.Start()
	m.Exec("", "ALTER USER root@localhost IDENTIFIED BY "+quote(AdminPassword)+"; CREATE DATABASE asterisk")
	m.Exec("asterisk", schema)
	m.Stop()
	if err := os.Rename(m.data(), dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "asterisk")); statErr != nil {
			t.Fatal(err) // not another test process's template
		}
	}
	return dir
}
