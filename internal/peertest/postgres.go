package peertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL cluster of one test (StartPostgres): its own
// data directory, listening only on a Unix socket in Dir. The superuser
// "postgres" logs in with the password AdminPassword (scram-sha-256, as
// every user): the DSNs of the tests carry real passwords.
type Postgres struct {
	// Dir holds the socket (and the data directory, under it).
	Dir string
	// Log is the server's output.
	Log *Output

	t     testing.TB
	bin   string
	cred  *syscall.Credential
	cmd   *exec.Cmd
	ended chan struct{}
}

// AdminPassword is the superuser's password.
const AdminPassword = "adm1n-pw"

// postgresBin finds the directory of initdb and postgres: on PATH, else
// Debian's /usr/lib/postgresql/VERSION/bin (the newest version).
func postgresBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	t.Fatal("PostgreSQL is not installed (make deps installs Debian's postgresql): no initdb on PATH or in /usr/lib/postgresql/*/bin")
	return ""
}

// version is the VERSION of /usr/lib/postgresql/VERSION/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// runAs is the user the server runs as: PostgreSQL refuses to run as
// root, so root runs it as "postgres" (Debian's package creates it) or
// else "nobody"; nil means the test's own user.
func runAs(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	t.Fatal("running as root, and neither user postgres nor nobody exists to run PostgreSQL as")
	return nil
}

// StartPostgres creates a cluster in a new directory and starts it; it
// is stopped and removed when the test ends. It returns once the server
// accepts the superuser: it starts in about a second; the 30 s bound only
// stops a broken start.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := &Postgres{t: t, bin: postgresBin(t), cred: runAs(t)}
	// Not t.TempDir: its parents are the test user's only, and the
	// server's user must reach the directory.
	dir, err := os.MkdirTemp("", "qualifyd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p.Dir = dir
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(AdminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p.cred != nil {
		for _, f := range []string{dir, pw} {
			if err := os.Chown(f, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	initdb := p.command(filepath.Join(p.bin, "initdb"), "-D", p.data(), "-U", "postgres", "--pwfile", pw,
		"--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.Start()
	t.Cleanup(p.kill)
	return p
}

func (p *Postgres) data() string { return filepath.Join(p.Dir, "data") }

// command is a command run as the server's user.
func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	return cmd
}

// Start starts the server on the cluster (again, after Stop) and waits
// until it accepts the superuser.
func (p *Postgres) Start() {
	p.t.Helper()
	p.Log = &Output{}
	p.cmd = p.command(filepath.Join(p.bin, "postgres"), "-D", p.data(), "-k", p.Dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "log_min_messages=warning")
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start postgres: %v", err)
	}
	p.ended = make(chan struct{})
	go func(cmd *exec.Cmd, ended chan struct{}) { _ = cmd.Wait(); close(ended) }(p.cmd, p.ended)
	err := awaitUp(30*time.Second, p.ended, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, p.DSN("postgres", AdminPassword, "postgres"))
		if err == nil {
			conn.Close(ctx)
		}
		return err
	})
	switch {
	case errors.Is(err, errExited):
		p.t.Fatalf("postgres exited:\n%s", p.Log)
	case err != nil:
		p.t.Fatalf("postgres did not accept connections in %s: %v\n%s", p.Dir, err, p.Log)
	}
}

// Stop shuts the server down (a fast shutdown: SIGINT) and waits until
// it has exited.
func (p *Postgres) Stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatalf("stop postgres: %v", err)
	}
	select {
	case <-p.ended:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("postgres did not stop:\n%s", p.Log)
	}
}

// kill ends the server's process group, at the test's end.
func (p *Postgres) kill() {
	select {
	case <-p.ended:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.ended
	if p.t.Failed() {
		p.t.Logf("postgres output:\n%s", p.Log)
	}
}

// DSN is the key=value connection string of user to database on the
// socket.
func (p *Postgres) DSN(user, password, database string) string {
	return fmt.Sprintf("host=%s user=%s password=%s dbname=%s", p.Dir, user, password, database)
}

// Exec runs sql (statements separated by ';') as the superuser in
// database.
func (p *Postgres) Exec(database, sql string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN("postgres", AdminPassword, database))
	if err != nil {
		p.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		p.t.Fatalf("%s: %v", strings.TrimSpace(sql), err)
	}
}

// StartRealtime starts a cluster whose database "asterisk" holds the
// tables Asterisk's Alembic migrations make (AlembicSchema), and a user
// "qualifyd" with password that may only SELECT from ps_aors,
// ps_endpoints and ps_auths: the grants docs/sources.md asks of a realtime
// source's user.
func StartRealtime(t testing.TB, password string) *Postgres {
	t.Helper()
	schema := AlembicSchema(t, "postgresql")
	p := StartPostgres(t)
	p.Exec("postgres", "CREATE DATABASE asterisk")
	p.Exec("asterisk", schema)
	p.Exec("asterisk", "CREATE ROLE qualifyd LOGIN PASSWORD "+quote(password)+
		"; GRANT SELECT ON ps_aors, ps_endpoints, ps_auths TO qualifyd")
	return p
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
