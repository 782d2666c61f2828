package main

import (
	"net"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestDaemonTellsSystemd runs the binary as systemd runs a Type=notify
// service with a watchdog (NOTIFY_SOCKET, WATCHDOG_USEC) and reads what
// it sends: READY=1 with its size once it serves, WATCHDOG=1 pings, and
// STOPPING=1 at SIGTERM.
func TestDaemonTellsSystemd(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, conf, "[pbx07]\ntype=aor\ncontact=sip:pbx07@127.0.0.1:9\nqualify_frequency=60\n")
	d := startDaemonEnv(t, []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=200000"},
		"--config", conf, "--http", "", "--sip-bind", "127.0.0.1:0")

	var got []string
	read := func(want string) {
		t.Helper()
		buf := make([]byte, 4096)
		for !slices.Contains(got, want) {
			// The bound only stops a broken run from hanging the suite.
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q after %q: %v", want, got, err)
			}
			got = append(got, string(buf[:n]))
		}
	}
	read("READY=1\nSTATUS=qualifying 1 contacts of 1 AoRs")
	if got[0] != "READY=1\nSTATUS=qualifying 1 contacts of 1 AoRs" {
		t.Fatalf("first message %q, want READY=1", got[0])
	}
	d.expect("qualifyd: started")
	read("WATCHDOG=1")
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	read("STOPPING=1")
	d.expect("qualifyd: stopped")
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
