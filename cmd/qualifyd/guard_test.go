package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuardRefuses: the guard's usage errors exit 2, and a file without
// a method=maintenance sink, or a SINK that is not one, exits 1 with the
// reason.
func TestGuardRefuses(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, filepath.Join(dir, "s"), "x\n")
	writeFile(t, conf, "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\nqualify_frequency=30\n\n"+
		"[dev]\ntype=sink\ndriver=ami\naddress=127.0.0.1:5038\nusername=q\nsecret_file=s\n\n"+
		"[hook]\ntype=sink\ndriver=webhook\nurl=http://127.0.0.1:1/\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no config", nil, 2, "qualifyd guard: --config FILE is required"},
		{"zero interval", []string{"--config", conf, "--interval", "0s"}, 2, "qualifyd guard: --interval 0s: want more than 0"},
		{"nothing to guard", []string{"--config", conf}, 1, "qualifyd guard: " + conf + ": no driver=ami method=maintenance sink: nothing to guard"},
		{"devstate named", []string{"--config", conf, "dev"}, 1, "sink dev is not driver=ami method=maintenance: only maintenance needs a guard (devstate fails open in the dial plan)"},
		{"unknown named", []string{"--config", conf, "nope"}, 1, "no sink named nope"},
		{"broken file", []string{"--config", filepath.Join(dir, "missing.conf")}, 1, "missing.conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"guard"}, tc.args...), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestGuardWritesItsLogBeforeExit: the guard's lines go through the
// daemon's asynchronous log; every line logged before it returns is
// written by then (the log is closed on exit, as the daemon's is).
func TestGuardWritesItsLogBeforeExit(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, filepath.Join(dir, "s"), "x\n")
	writeFile(t, conf, "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\nqualify_frequency=30\n\n"+
		"[e]\ntype=endpoint\naors=a\n\n"+
		"[m]\ntype=sink\ndriver=ami\nmethod=maintenance\naddress=127.0.0.1:1\nusername=q\nsecret_file=s\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the guard checks once and returns
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"guard", "--config", conf}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if want := "guard: sink m: guarding 127.0.0.1:1 every 2s"; !strings.Contains(stdout.String(), want) {
		t.Fatalf("stdout %q when the guard returned, want %q", stdout.String(), want)
	}
}
