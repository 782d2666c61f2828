package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigSources: --connect reads each source once and prints
// what it imports; without it the source is not read, and its overlay
// is not checked.
func TestCheckConfigSources(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "dispatcher.list"), "1 sip:192.0.2.10:5060 0 0 duid=gw-paris\n2 sip:192.0.2.11\n2 sip:192.0.2.12 4\n")
	conf := filepath.Join(dir, "q.conf")
	writeFile(t, conf, "[gw](!)\ntype=aor\nqualify_frequency=30\n[ds]\ntype=source\ndriver=dispatcher_file\npath=dispatcher.list\ntemplate=gw\n[gw-paris](+type=aor)\nqualify_failures=5\n")
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "--connect", conf}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	for _, want := range []string{"OK: 2 AoRs (2 qualified)", "source ds (dispatcher_file): OK: imports 2 objects\n",
		"  aor gw-paris contact=sip:192.0.2.10:5060\n", "  aor ds2-192.0.2.11-5060 contact=sip:192.0.2.11\n",
		"failures=5"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"check-config", conf}, &out, &errs); code != 0 || !strings.Contains(out.String(), "OK: 0 AoRs") {
		t.Fatalf("without --connect: exit %d\n%s%s", code, out.String(), errs.String())
	}
	writeFile(t, filepath.Join(dir, "dispatcher.list"), "1\n")
	errs.Reset()
	if code := run(context.Background(), []string{"check-config", "--connect", conf}, &out, &errs); code != 1 ||
		!strings.Contains(errs.String(), `section "ds": source error: `+filepath.Join(dir, "dispatcher.list")+":1: set 1 has no destination URI") {
		t.Fatalf("broken list: exit %d\n%s", code, errs.String())
	}
}

// TestCheckConfigRealtime: --connect reads a realtime database once and
// prints its AoRs, endpoints and auths, the auth's password as
// "(secret)"; neither the output nor an error shows the DSN's password.
func TestCheckConfigRealtime(t *testing.T) {
	eachRealtimeDB(t, "cc-db-pw", testCheckConfigRealtime)
}

func testCheckConfigRealtime(t *testing.T, db realtimeDB) {
	db.exec(`
		INSERT INTO ps_aors (id, contact, qualify_frequency) VALUES ('pbx-trunk', 'sip:192.0.2.30:5060', 45);
		INSERT INTO ps_endpoints (id, aors, outbound_auth) VALUES ('pbx-trunk', 'pbx-trunk', 'pbx-auth');
		INSERT INTO ps_auths (id, auth_type, username, password) VALUES ('pbx-auth', 'userpass', 'bob', 'auth-pw')`)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "realtime.dsn"), db.dsn("cc-db-pw")+"\n")
	conf := filepath.Join(dir, "q.conf")
	writeFile(t, conf, "[db]\ntype=source\ndriver=realtime\ndsn_file=realtime.dsn\n")
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "--connect", conf}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	want := "source db (realtime): OK: imports 3 objects\n" +
		"  aor pbx-trunk contact=sip:192.0.2.30:5060 qualify_frequency=45\n" +
		"  endpoint pbx-trunk aors=pbx-trunk outbound_auth=pbx-auth\n" +
		"  auth pbx-auth username=bob password=(secret)\n"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String()+errs.String(), "auth-pw") {
		t.Fatalf("output lacks\n%s\nor shows a password:\n%s%s", want, out.String(), errs.String())
	}
	writeFile(t, filepath.Join(dir, "realtime.dsn"), db.dsn("wr0ng-db-pw")+"\n")
	out.Reset()
	if code := run(context.Background(), []string{"check-config", "--connect", conf}, &out, &errs); code != 1 ||
		!strings.Contains(errs.String(), `section "db": source error: failed to connect to`) ||
		strings.Contains(out.String()+errs.String(), "wr0ng-db-pw") {
		t.Fatalf("wrong password: exit %d\n%s%s", code, out.String(), errs.String())
	}
}
