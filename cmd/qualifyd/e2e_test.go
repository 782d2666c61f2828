package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// binary is the qualifyd executable built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qualifyd-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "qualifyd")
	out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building qualifyd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemonProc is a running `qualifyd run` whose stdout is read line by line.
type daemonProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	seen  []string
}

// startDaemon runs the binary with args; the test fails if it is still
// running at the end.
func startDaemon(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	return startDaemonEnv(t, nil, args...)
}

// startDaemonEnv is startDaemon with env added to the environment.
func startDaemonEnv(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return startProc(t, cmd)
}

// startProc starts cmd, a qualifyd command, and reads its stdout line by
// line; it is killed at the end of the test.
func startProc(t *testing.T, cmd *exec.Cmd) *daemonProc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{t: t, cmd: cmd, lines: make(chan string, 1024)}
	go d.read(stdout)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return d
}

func (d *daemonProc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		d.lines <- sc.Text()
	}
	close(d.lines)
}

// expect waits for a line containing want (lines before it are kept in
// seen). The bound only stops a broken run from hanging the suite.
func (d *daemonProc) expect(want string) string {
	d.t.Helper()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("qualifyd exited before printing %q; it printed:\n%s", want, strings.Join(d.seen, "\n"))
			}
			d.seen = append(d.seen, l)
			if strings.Contains(l, want) {
				return l
			}
		case <-bound.C:
			d.t.Fatalf("no line with %q; got:\n%s", want, strings.Join(d.seen, "\n"))
		}
	}
}

// parseStamp returns the time qualifyd stamped on its text log line
// (logStamp): its own record of when it logged it, however late the
// test reads it.
func parseStamp(line string) (time.Time, error) {
	if len(line) < len(logStamp) {
		return time.Time{}, fmt.Errorf("a line without a stamp: %q", line)
	}
	at, err := time.ParseInLocation(logStamp, line[:len(logStamp)], time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("line %q: %w", line, err)
	}
	return at, nil
}

// lineStamp is parseStamp, failing the test on a line without a stamp.
func lineStamp(t *testing.T, line string) time.Time {
	t.Helper()
	at, err := parseStamp(line)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDaemonLogsReloadAndStops(t *testing.T) {
	var drop atomic.Bool
	r, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action {
		return responder.Action{Drop: drop.Load()}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	uri := "sip:pbx07@" + r.Addr().String()
	conf := filepath.Join(t.TempDir(), "qualifyd.conf")
	good := fmt.Sprintf("[pbx07]\ntype=aor\ncontact=%s\nqualify_frequency=1\nqualify_timeout=0.3\n"+
		"qualify_failures=2\nqualify_retry_interval=0.2\n\n[pbx07]\ntype=endpoint\naors=pbx07\n", uri)
	writeFile(t, conf, good)
	d := startDaemon(t, "--config", conf, "--http", "", "--sip-bind", "127.0.0.1:0")
	d.expect("qualifyd: started")
	// Each endpoint line comes just before the contact line that caused
	// it, and the first Reachable contact prints one (qualify-semantics
	// §10): expect skips lines, so the order is checked.
	d.expect("Endpoint pbx07 is now Reachable")
	d.expect("Contact pbx07/" + uri + " is now Reachable.  RTT: ")

	drop.Store(true)
	d.expect("Contact pbx07/" + uri + " qualify failed (timeout): 1/2 failures, retrying in 0.2s")
	d.expect("Endpoint pbx07 is now Unreachable")
	d.expect("Contact pbx07/" + uri + " is now Unreachable.  RTT: 0.000 msec")

	writeFile(t, conf, good+"\n[broken]\ntype=aor\nqualify_failures=0\n")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := d.expect("reload failed, keeping the running configuration: ")
	if !strings.Contains(line, conf+":15: ") || !strings.Contains(line, `"qualify_failures"`) {
		t.Fatalf("reload error does not locate the problem: %s", line)
	}
	drop.Store(false) // the running configuration still probes
	d.expect("Endpoint pbx07 is now Reachable")
	d.expect("Contact pbx07/" + uri + " is now Reachable.")

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.expect("qualifyd: stopped")
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestDaemonRefusesBrokenConfig(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "bad.conf")
	writeFile(t, conf, "[a]\ntype=aor\nqualify_frequency=abc\n")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "run", "--config", conf, "--http", "").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1; output %s", err, out)
	}
	if !strings.Contains(string(out), conf+":3: ") {
		t.Fatalf("error does not name the line: %s", out)
	}
}
