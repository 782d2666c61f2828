// Package peertest starts the real SIP peers of the interoperability tests
// (SIPp, Kamailio) as child processes of a test, on loopback. A missing
// peer fails the test rather than skipping it, so that an interop test
// never passes unrun; `make deps` installs them. It is imported by tests
// only.
package peertest

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Require returns the path of program name, failing the test when it is
// not installed. Debian puts kamailio and kamcmd in /usr/sbin, which a
// user's PATH may lack.
func Require(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		path, err = exec.LookPath(filepath.Join("/usr/sbin", name))
	}
	if err != nil {
		t.Fatalf("%s is not installed (make deps installs sip-tester and kamailio): %v", name, err)
	}
	return path
}

// FreePort returns a loopback port of network ("udp" or "tcp") that was
// free a moment ago.
func FreePort(t testing.TB, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Output is a peer's output, readable while the peer writes it.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns the output so far.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs program name in a temporary directory and its own process
// group until the test ends, then kills the group (Kamailio forks
// workers) and waits for it, at most 5 s for its output pipes. The
// output is logged when the test fails.
func Start(t testing.TB, name string, args ...string) *Output {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Require(t, name), args...)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s %s output:\n%s", name, strings.Join(args, " "), out)
		}
	})
	return out
}
