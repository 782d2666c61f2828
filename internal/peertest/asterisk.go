package peertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AsteriskEnv names the environment variable holding the prefix of the
// real Asterisk (`make deps` builds it with ../shared/peers/asterisk's
// build.sh into ${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd/asterisk).
const AsteriskEnv = "QUALIFYD_ASTERISK"

// AsteriskQualifyEnv names the environment variable holding the prefix of
// the Asterisk built with contrib/asterisk's qualify patches (`make deps`
// builds it with contrib/asterisk/build.sh into
// ${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd/asterisk-qualify).
const AsteriskQualifyEnv = "QUALIFYD_ASTERISK_QUALIFY"

// Asterisk is a real Asterisk run from a directory of the test's own
// (NewAsterisk): its Manager on 127.0.0.1:AMIPort (user qualifyd, secret
// AMISecret, write=call,system), a PJSIP UDP transport on
// 127.0.0.1:SIPPort, and the configuration files the test writes with
// Write before Start. astdb lives in the directory, so it survives a
// Stop and a Start.
type Asterisk struct {
	Prefix, Dir      string
	AMIPort, SIPPort int
	// Log is the output of the running process.
	Log *Output

	t    testing.TB
	conf string
	cmd  *exec.Cmd
	// exited is closed when the process has ended, waitErr then its
	// status; both are replaced at each Start.
	exited  chan struct{}
	waitErr error
}

// bootBound bounds Asterisk's boot: a quiet machine boots it in well
// under a second, a loaded one (a build beside it) in seconds; the bound
// only stops a broken start, and a boot over slowBoot is reported.
const (
	bootBound = 60 * time.Second
	slowBoot  = 5 * time.Second
)

// AMISecret is the Manager user qualifyd's secret.
const AMISecret = "s3cret"

// NewAsterisk prepares an Asterisk in a fresh directory, with free ports,
// asterisk.conf, modules.conf, logger.conf and manager.conf written. It
// fails the test when QUALIFYD_ASTERISK names no Asterisk build.
func NewAsterisk(t testing.TB) *Asterisk {
	t.Helper()
	return NewAsteriskFrom(t, AsteriskEnv)
}

// NewAsteriskFrom is NewAsterisk with the build the environment variable
// env names (AsteriskEnv or AsteriskQualifyEnv).
func NewAsteriskFrom(t testing.TB, env string) *Asterisk {
	t.Helper()
	prefix := os.Getenv(env)
	if _, err := os.Stat(filepath.Join(prefix, "sbin", "asterisk")); prefix == "" || err != nil {
		t.Fatalf("no Asterisk: %s=%q (make deps builds it; run the tests through make test or set it): %v", env, prefix, err)
	}
	a := &Asterisk{Prefix: prefix, Dir: t.TempDir(), AMIPort: FreePort(t, "tcp"), SIPPort: FreePort(t, "udp"), t: t}
	a.conf = filepath.Join(a.Dir, "etc", "asterisk.conf")
	for _, d := range []string{"etc", "lib", "spool", "run", "log", "cache"} {
		if err := os.MkdirAll(filepath.Join(a.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a.Write("asterisk.conf", a.directories())
	a.Write("modules.conf", "[modules]\nautoload = yes\n")
	a.Write("logger.conf", "[general]\n[logfiles]\nmessages => notice,warning,error,verbose\n")
	a.Write("manager.conf", fmt.Sprintf("[general]\nenabled = yes\nport = %d\nbindaddr = 127.0.0.1\n\n"+
		"[qualifyd]\nsecret = %s\nread =\nwrite = call,system\n", a.AMIPort, AMISecret))
	t.Cleanup(a.Stop)
	return a
}

// directories is asterisk.conf: every directory in a.Dir or the build.
func (a *Asterisk) directories() string {
	var b strings.Builder
	b.WriteString("[directories]\n")
	for _, kv := range [][2]string{{"astetcdir", a.Dir + "/etc"}, {"astmoddir", a.Prefix + "/lib/asterisk/modules"},
		{"astvarlibdir", a.Dir + "/lib"}, {"astdbdir", a.Dir + "/lib"}, {"astkeydir", a.Dir + "/lib"},
		{"astdatadir", a.Prefix + "/var/lib/asterisk"}, {"astagidir", a.Dir + "/lib/agi-bin"},
		{"astspooldir", a.Dir + "/spool"}, {"astrundir", a.Dir + "/run"}, {"astlogdir", a.Dir + "/log"},
		{"astcachedir", a.Dir + "/cache"}, {"astsbindir", a.Prefix + "/sbin"}} {
		fmt.Fprintf(&b, "%s => %s\n", kv[0], kv[1])
	}
	b.WriteString("[options]\nverbose = 3\n")
	return b.String()
}

// Write writes the configuration file name (in etc/).
func (a *Asterisk) Write(name, body string) {
	a.t.Helper()
	if err := os.WriteFile(filepath.Join(a.Dir, "etc", name), []byte(body), 0o644); err != nil {
		a.t.Fatal(err)
	}
}

// Start runs Asterisk in the foreground (-f) in its own process group
// and returns once it is fully booted and its Manager accepts
// connections. It first makes sure no earlier Asterisk of the directory
// still answers on its control socket. A start that fails says which
// step did not come (the process exited, the control socket, the full
// boot or the Manager's port, and whether another process holds it),
// with Asterisk's log file; a boot slower than slowBoot is logged.
func (a *Asterisk) Start() {
	a.t.Helper()
	if err := a.ctlGone(); err != nil {
		a.t.Fatalf("asterisk restart: %v", err)
	}
	a.cmd = exec.Command(filepath.Join(a.Prefix, "sbin", "asterisk"), "-f", "-C", a.conf)
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a.cmd.WaitDelay = 5 * time.Second
	a.Log = &Output{}
	a.cmd.Stdout, a.cmd.Stderr = a.Log, a.Log
	if err := a.cmd.Start(); err != nil {
		a.cmd = nil
		a.t.Fatalf("start asterisk: %v", err)
	}
	a.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { a.waitErr = cmd.Wait(); close(exited) }(a.cmd, a.exited)
	began := time.Now()
	err := awaitUp(bootBound, a.exited, func(context.Context) error {
		if _, err := a.CLI("core waitfullybooted"); err != nil {
			return fmt.Errorf("not fully booted: %w", err)
		}
		return a.managerUp()
	})
	took := time.Since(began).Round(10 * time.Millisecond)
	switch {
	case errors.Is(err, errExited):
		a.t.Fatalf("asterisk exited %v into its boot (%v)\n%s", took, a.waitErr, a.logs())
	case err != nil:
		a.t.Fatalf("asterisk did not boot within %v (a bound, not a race: no earlier Asterisk answered): %v (%s)\n%s",
			bootBound, err, a.portHeld(), a.logs())
	case took > slowBoot:
		a.t.Logf("asterisk booted in %v (slow: the machine is loaded)", took)
	}
}

// ctlGone returns an error when an Asterisk still answers on the
// directory's control socket (an earlier one not yet gone); a socket
// file left by a killed one is no error: Asterisk replaces it.
func (a *Asterisk) ctlGone() error {
	ctl := filepath.Join(a.Dir, "run", "asterisk.ctl")
	c, err := net.DialTimeout("unix", ctl, time.Second)
	if err != nil {
		return nil
	}
	c.Close()
	return fmt.Errorf("an earlier Asterisk still answers on %s", ctl)
}

// logs is what Asterisk wrote: its output and its log file.
func (a *Asterisk) logs() string {
	file, err := os.ReadFile(filepath.Join(a.Dir, "log", "messages"))
	if err != nil {
		file = []byte(err.Error())
	}
	return fmt.Sprintf("asterisk output:\n%s\nlog/messages:\n%s", a.Log, file)
}

// managerUp reports whether the Manager accepts a connection.
func (a *Asterisk) managerUp() error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", a.AMIPort), time.Second)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	c.Close()
	return nil
}

// portHeld says, after a failed boot, whether another socket holds the
// Manager's port (so that Asterisk could not bind it).
func (a *Asterisk) portHeld() string {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", a.AMIPort))
	if err != nil {
		return fmt.Sprintf("the Manager's port is held: %v", err)
	}
	l.Close()
	return "the Manager's port is free"
}

// Stop stops Asterisk (`core stop now`, then SIGKILL of its group if it
// is still there after 5 s) and waits for it; it does nothing when
// Asterisk is not running.
func (a *Asterisk) Stop() {
	if a.cmd == nil {
		return
	}
	_, cliErr := a.CLI("core stop now")
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.exited
	}
	waitErr := a.waitErr
	if a.t.Failed() {
		// An Asterisk that had died before the stop (killed by another
		// program's `killall asterisk`, say) refuses the CLI and exits
		// with the signal that ended it: say so.
		a.t.Logf("asterisk output:\n%s\nasterisk exited: %v (the stop's CLI: %v)", a.Log, waitErr, cliErr)
	}
	a.cmd = nil
}

// CLI runs one CLI command through the running Asterisk (asterisk -rx)
// and returns its output.
func (a *Asterisk) CLI(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(a.Prefix, "sbin", "asterisk"), "-C", a.conf, "-rx", command).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("asterisk -rx %q: %v: %s", command, err, out)
	}
	return string(out), nil
}
