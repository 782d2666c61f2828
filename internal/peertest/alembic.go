package peertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// alembicSchemas caches AlembicSchema's SQL per dialect for the test
// process.
var alembicSchemas sync.Map

// AlembicSchema is the SQL that Asterisk's Alembic migrations for its
// realtime configuration tables (contrib/ast-db-manage/config, every
// revision up to head) emit for dialect ("mysql", "postgresql"), made by
// running alembic offline (`alembic upgrade head --sql`) on the
// migrations `make deps` extracts into QUALIFYD_ASTERISK/ast-db-manage
// from the Asterisk source it builds. No database is reached. It fails
// the test without alembic (Debian's alembic) or the migrations.
func AlembicSchema(t testing.TB, dialect string) string {
	t.Helper()
	if sql, ok := alembicSchemas.Load(dialect); ok {
		return sql.(string)
	}
	alembic, err := exec.LookPath("alembic")
	if err != nil {
		t.Fatalf("alembic is not installed (make deps installs Debian's alembic): %v", err)
	}
	scripts := filepath.Join(os.Getenv(AsteriskEnv), "ast-db-manage", "config")
	if _, err := os.Stat(filepath.Join(scripts, "env.py")); os.Getenv(AsteriskEnv) == "" || err != nil {
		t.Fatalf("no Asterisk Alembic migrations: %s=%q (make deps extracts contrib/ast-db-manage there): %v", AsteriskEnv, os.Getenv(AsteriskEnv), err)
	}
	ini := filepath.Join(t.TempDir(), "alembic.ini")
	if err := os.WriteFile(ini, []byte("[alembic]\nscript_location = "+scripts+"\nsqlalchemy.url = "+dialect+"://asterisk@localhost/asterisk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(alembic, "-c", ini, "upgrade", "head", "--sql")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr Output
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("alembic upgrade head --sql (%s): %v\n%s", dialect, err, &stderr)
	}
	alembicSchemas.Store(dialect, string(out))
	return string(out)
}
