package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// authList is a realtime list: an AoR, its endpoint and its ps_auths row.
func authList(password string) []pjsip.Object {
	return []pjsip.Object{
		{Type: "aor", Name: "trunk", Options: []pjsip.KeyValue{{Key: "contact", Value: "sip:192.0.2.10"}}},
		{Type: "auth", Name: "trunk-auth", Options: []pjsip.KeyValue{{Key: "username", Value: "trunk"}, {Key: "password", Value: password}, {Key: "realm", Value: "pbx"}}},
		{Type: "endpoint", Name: "trunk", Options: []pjsip.KeyValue{{Key: "aors", Value: "trunk"}, {Key: "outbound_auth", Value: "trunk-auth"}}},
	}
}

// sealedDB is a realtime source whose connection string is dsn.
func sealedDB(dsn string) *pjsip.Source {
	return &pjsip.Source{Name: "pbx-db", Driver: "realtime", DSNFile: "realtime.dsn", DSN: pjsip.Secret(dsn), RefreshInterval: time.Minute}
}

// restartWith restores file into a keeper whose database is down and
// imports db from it.
func restartWith(t *testing.T, file string, db *pjsip.Source) ([]pjsip.Object, error) {
	t.Helper()
	k := newKeeper(t, &fakeDriver{err: errors.New("failed to connect")})
	k.File = file
	if err := k.Restore(); err != nil {
		t.Fatal(err)
	}
	return k.Round(context.Background(), true, false).Import(db)
}

// password is the password option of list's auth object.
func password(list []pjsip.Object) string {
	for _, o := range list {
		for _, kv := range o.Options {
			if o.Type == "auth" && kv.Key == "password" {
				return kv.Value
			}
		}
	}
	return ""
}

// TestSourcesFileSealsPasswords: the sources file holds a realtime
// list's ps_auths password sealed, never in clear; a restart with the
// database down opens it with the same connection string, and cannot
// with another (the list is then not used, and the error says why).
func TestSourcesFileSealsPasswords(t *testing.T) {
	const dsn, secret = "postgres://qualifyd:db-pw@db/asterisk", "trunk-secret-77"
	k := newKeeper(t, &fakeDriver{list: authList(secret)})
	r := k.Round(context.Background(), true, false)
	list, err := r.Import(sealedDB(dsn))
	if err != nil || r.Commit() != nil {
		t.Fatal(err)
	}
	if password(list) != secret {
		t.Fatalf("the imported list's password is %q: sealing must not touch the list in use", password(list))
	}
	data, err := os.ReadFile(k.File)
	if err != nil || strings.Contains(string(data), secret) || strings.Contains(string(data), "db-pw") ||
		!strings.Contains(string(data), `"Value":"sealed:`) || !strings.Contains(string(data), `"version":2`) {
		t.Fatalf("sources file %s (%v)", data, err)
	}
	got, err := restartWith(t, k.File, sealedDB(dsn))
	if err != nil || len(got) != 3 || password(got) != secret {
		t.Fatalf("after a restart: %d objects, password %q, error %v", len(got), password(got), err)
	}
	_, err = restartWith(t, k.File, sealedDB("postgres://qualifyd:rotated@db/asterisk"))
	if want := "failed to connect, and the last good list cannot be used: " + errSealed.Error(); err == nil || err.Error() != want {
		t.Fatalf("another connection string: got %v, want %s", err, want)
	}
}

// TestSourcesFileVersion1IsRead: a file of an earlier qualifyd, its
// password in clear, is still used; the next commit writes it sealed.
func TestSourcesFileVersion1IsRead(t *testing.T) {
	const dsn, secret = "postgres://qualifyd:db-pw@db/asterisk", "trunk-secret-77"
	k := newKeeper(t, &fakeDriver{err: errors.New("failed to connect")})
	v1 := `{"version":1,"sources":{"pbx-db":{"driver":"realtime","dsn_file":"realtime.dsn","time":"2026-11-30T10:00:00Z","objects":[` +
		`{"Type":"aor","Name":"trunk","Options":[{"Key":"contact","Value":"sip:192.0.2.10"}],"File":"","Line":0},` +
		`{"Type":"auth","Name":"trunk-auth","Options":[{"Key":"username","Value":"trunk"},{"Key":"password","Value":"` + secret + `"}],"File":"","Line":0}]}}}`
	if err := os.WriteFile(k.File, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.Restore(); err != nil {
		t.Fatal(err)
	}
	r := k.Round(context.Background(), true, false)
	list, err := r.Import(sealedDB(dsn))
	if err != nil || len(list) != 2 || password(list) != secret {
		t.Fatalf("version 1: %d objects, password %q, error %v", len(list), password(list), err)
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(k.File); err != nil || strings.Contains(string(data), secret) {
		t.Fatalf("rewritten file %s (%v): the password is still in clear", data, err)
	}
	if got, err := restartWith(t, k.File, sealedDB(dsn)); err != nil || password(got) != secret {
		t.Fatalf("after the upgrade: password %q, error %v", password(got), err)
	}
}

// FuzzSourcesFile: whatever the sources file holds (a damaged or
// hostile one), Restore and a start with the database down that falls
// back on it return a list or an error, and never panic.
func FuzzSourcesFile(f *testing.F) {
	up := &fakeDriver{list: authList("trunk-secret-77")}
	k := &Keeper{File: filepath.Join(f.TempDir(), "seed.sources"), Driver: func(*pjsip.Source) (Driver, error) { return up, nil }}
	r := k.Round(context.Background(), true, false)
	if _, err := r.Import(sealedDB("postgres://q:pw@db/a")); err != nil || r.Commit() != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(k.File)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(strings.Replace(string(seed), `"version":2`, `"version":1`, 1)))
	f.Add([]byte(`{"version":2,"sources":{"pbx-db":{"driver":"realtime","dsn_file":"realtime.dsn","objects":[{"Type":"auth","Name":"x","Options":[{"Key":"password","Value":"sealed:AAAA"}]}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "state.sources")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		down := newKeeper(t, &fakeDriver{err: errors.New("failed to connect")})
		down.File = file
		if down.Restore() != nil {
			return
		}
		_, _ = down.Round(context.Background(), true, false).Import(sealedDB("postgres://q:pw@db/a"))
		_ = down.Status()
	})
}
