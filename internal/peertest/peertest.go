// Package peertest starts the real peers of the interoperability tests
// (SIPp, Kamailio, PostgreSQL, MariaDB, Asterisk) as child processes of a
// test, on loopback; Kamailio through StartKamailio, PostgreSQL through
// StartPostgres (postgres.go: its own cluster on a Unix socket) and
// MariaDB through StartRealtimeMariaDB (mariadb.go: likewise), which wait
// until they answer; the realtime tables through Asterisk's Alembic
// migrations (alembic.go). A missing peer fails the test rather than
// skipping it, so that an interop test never passes unrun; `make deps`
// installs them. It is imported by tests only.
package peertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// FreePort returns a loopback port of network ("udp" or "tcp") that is
// free now and that no other caller holds, in this test binary or in
// another running beside it (make test runs several packages at once).
// The port is below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so no bind of port 0 and no outgoing
// connection of another program takes it while its peer is down: a
// cluster node or an Asterisk restarted on its ports, or a daemon not yet
// listening. Asterisk given a taken Manager port runs without its
// Manager ("Unable to bind AMI server") and writes nothing to its output;
// a node given a taken route port does not start. Test binaries reserve
// a port by locking a file named after it (see reserve), which the kernel
// releases when the binary exits, however it ends.
func FreePort(t testing.TB, network string) int {
	t.Helper()
	low := ephemeralLow()
	handed.mu.Lock()
	defer handed.mu.Unlock()
	for range 1000 {
		port := low - 1 - rand.IntN(low-portFloor)
		key := network + "-" + strconv.Itoa(port)
		if _, ok := handed.locks[key]; ok {
			continue
		}
		f := reserve(t, key)
		if f == nil {
			continue
		}
		if !bindable(network, port) {
			f.Close()
			continue
		}
		handed.locks[key] = f
		return port
	}
	t.Fatalf("no free %s port on loopback in %d-%d", network, portFloor, low-1)
	return 0
}

// portFloor is the lowest port FreePort hands out.
const portFloor = 20000

// reserve locks the file os.TempDir()/qualifyd-ports/key for this
// process, returning it open (closing it releases the lock), or nil when
// another test binary holds it. The files stay; only their locks count.
func reserve(t testing.TB, key string) *os.File {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "qualifyd-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("reserving test ports: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, key), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("reserving test ports: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (Linux's default 32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= portFloor+1000 {
		return 32768
	}
	return n
}

// bindable reports whether port of network binds on loopback now.
func bindable(network string, port int) bool {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if network == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
	}
	return err == nil
}

// handed holds the ports FreePort has returned, by "network-port", with
// the open file whose lock reserves each for this process.
var handed = struct {
	mu    sync.Mutex
	locks map[string]*os.File
}{locks: map[string]*os.File{}}

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

// Kamailio is a running Kamailio (StartKamailio): its SIP address, its
// JSON-RPC URL, its ctl socket (for kamcmd) and its output.
type Kamailio struct {
	SIP, RPC, Ctl string
	Log           *Output
}

// StartKamailio runs Kamailio on loopback with the configuration cfg
// (the interop tests' kamailio.cfg, which takes LISTEN, HTTP_PORT, DSLIST
// and CTLSOCK, and sets its shared memory) and the dispatcher list file
// dslist, with the private memory (-M 64) docs/routers.md gives for 100,000
// destinations, and returns once its JSON-RPC answers core.version: it
// starts in well under a second; the 20 s bound only stops a broken start.
// Each of defines, NAME=VALUE, is one more -A.
func StartKamailio(t testing.TB, cfg, dslist string, defines ...string) *Kamailio {
	t.Helper()
	dir := t.TempDir()
	httpPort := FreePort(t, "tcp")
	k := &Kamailio{SIP: fmt.Sprintf("127.0.0.1:%d", FreePort(t, "udp")),
		RPC: fmt.Sprintf("http://127.0.0.1:%d/RPC", httpPort), Ctl: "unix:" + filepath.Join(dir, "kamailio.ctl")}
	args := []string{"-f", cfg, "-DD", "-E", "-w", dir, "-Y", dir, "-P", filepath.Join(dir, "kamailio.pid"),
		"-M", "64", "-A", "LISTEN=udp:" + k.SIP, "-A", "HTTP_PORT=" + strconv.Itoa(httpPort),
		"-A", fmt.Sprintf("DSLIST=%q", dslist), "-A", fmt.Sprintf("CTLSOCK=%q", k.Ctl)}
	for _, d := range defines {
		args = append(args, "-A", d)
	}
	k.Log = Start(t, "kamailio", args...)
	if err := awaitUp(20*time.Second, nil, k.answers); err != nil {
		t.Fatalf("kamailio did not answer on %s: %v", k.RPC, err)
	}
	return k
}

// errExited is awaitUp's error when the peer's process has ended.
var errExited = errors.New("the process exited")

// awaitUp polls up every 50 ms until it returns nil. It gives up with
// up's last error once bound has passed, or with errExited once exited
// is closed (a nil exited never is). The bound only stops a broken start.
func awaitUp(bound time.Duration, exited <-chan struct{}, up func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for {
		err := up(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-exited:
			return errExited
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answers reports whether Kamailio's JSON-RPC answers core.version.
func (k *Kamailio) answers(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "POST", k.RPC, strings.NewReader(`{"jsonrpc":"2.0","method":"core.version","id":1}`))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}
