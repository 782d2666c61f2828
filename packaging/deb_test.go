package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The package's paths, as it installs them.
const (
	binPath   = "/usr/bin/qualifyd"
	unitPath  = "/lib/systemd/system/qualifyd.service"
	guardPath = "/lib/systemd/system/qualifyd-guard.service"
	confPath  = "/etc/qualifyd/qualifyd.conf"
	manPath   = "/usr/share/man/man8/qualifyd.8.gz"
	man5Path  = "/usr/share/man/man5/qualifyd.conf.5.gz"
	tokenPath = "/etc/qualifyd/token"
	docPath   = "/usr/share/doc/qualifyd/changelog.gz"
	copyPath  = "/usr/share/doc/qualifyd/copyright"
	rulesPath = "/usr/share/doc/qualifyd/examples/qualifyd.rules.yml"
	grafana   = "/usr/share/qualifyd/grafana/qualifyd.json"
)

// TestDebInstall installs the package $QUALIFYD_DEB (make deb-test, part
// of make test, builds it) with dpkg, runs what it installed, adds a
// webhook sink to the configuration, reinstalls the package over itself (an
// upgrade's scripts, which leave the routers alone), then removes it (its
// prerm releases the sink: the receiver hears every object removed) and
// purges it. It needs
// root and changes the system, so it runs only when QUALIFYD_DEB is set;
// then a missing privilege is a failure, not a skip. It refuses to touch a
// system where qualifyd is installed, as a package or by hand.
func TestDebInstall(t *testing.T) {
	deb := os.Getenv("QUALIFYD_DEB")
	if deb == "" {
		t.Skip("installs a package as root: runs under make deb-test (QUALIFYD_DEB=FILE)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("dpkg -i needs root")
	}
	refuseInstalled(t)
	need(t, "systemd-analyze", "systemd")
	need(t, "man", "man-db")
	version := strings.TrimSpace(mustRun(t, "dpkg-deb", "-f", deb, "Version"))
	t.Cleanup(func() { purge(t) })

	mustRun(t, "dpkg", "-i", deb)
	checkInstalled(t, version)
	hook := addWebhook(t)
	mustRun(t, "dpkg", "-i", deb)
	checkInstalled(t, version)
	if got := hook.received(); len(got) != 0 {
		t.Errorf("an upgrade pushed %q to the sink", got)
	}

	mustRun(t, "dpkg", "-r", "qualifyd")
	checkStatus(t, "rc ")
	if got, want := hook.received(), []string{"aor example-trunk removed", "contact example-trunk removed"}; !slices.Equal(got, want) {
		t.Errorf("remove pushed %q to the sink, want %q (qualifyd release)", got, want)
	}
	checkGone(t, binPath, unitPath, guardPath, manPath, man5Path, docPath, copyPath, rulesPath)
	checkPresent(t, confPath, tokenPath)

	mustRun(t, "dpkg", "-P", "qualifyd")
	checkStatus(t, "")
	checkGone(t, confPath, tokenPath, filepath.Dir(confPath))
}

// receiver is a webhook sink's receiver: what it was sent, "KIND NAME TO".
type receiver struct {
	mu  sync.Mutex
	got []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var c struct{ Kind, AoR, To string }
	if err := json.NewDecoder(req.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, c.Kind+" "+c.AoR+" "+c.To)
	r.mu.Unlock()
}

// received returns what the receiver was sent, sorted.
func (r *receiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.got))
}

// addWebhook appends a webhook sink to the installed configuration, its
// receiver served by the test.
func addWebhook(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	f, err := os.OpenFile(confPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "\n[hook]\ntype=sink\ndriver=webhook\nurl=%s/qualifyd\n", srv.URL); err != nil {
		t.Fatal(err)
	}
	return r
}

// refuseInstalled stops the test where it would overwrite or purge a
// qualifyd it did not install: the package in any state, or any of its
// files put there by other means.
func refuseInstalled(t *testing.T) {
	t.Helper()
	if st := status(t); st != "" {
		t.Fatalf("refusing: package qualifyd is on this system (dpkg status %q); dpkg -P qualifyd first", st)
	}
	for _, p := range []string{binPath, unitPath, guardPath, confPath, manPath, tokenPath, "/var/lib/qualifyd"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("refusing: %s exists and is not from the qualifyd package", p)
		}
	}
}

// checkInstalled checks the installed package: its metadata, its files,
// the version the binary prints, the sample configuration the unit's
// check passes, and the man page.
func checkInstalled(t *testing.T, version string) {
	t.Helper()
	checkStatus(t, "ii ")
	checkFields(t)
	if got, want := mustRun(t, binPath, "--version"), "qualifyd "+version; !strings.HasPrefix(got, want+"\n") && !strings.HasPrefix(got, want+" (") {
		t.Errorf("qualifyd --version = %q, want %q", got, want)
	}
	if out := mustRun(t, binPath, "check-config", confPath); !strings.Contains(out, "OK: 1 AoRs (1 qualified)") {
		t.Errorf("check-config %s: %q, want its one example AoR", confPath, out)
	}
	checkUnit(t)
	checkGuardUnit(t)
	checkMan(t)
	if !bytes.HasPrefix(gunzip(t, docPath), []byte("qualifyd ("+version+") ")) {
		t.Errorf("%s: not a Debian changelog of %s", docPath, version)
	}
	if !bytes.Equal(readFile(t, copyPath), readFile(t, "copyright")) {
		t.Errorf("%s is not packaging/copyright", copyPath)
	}
	checkToken(t)
	if got, want := readFile(t, rulesPath), readFile(t, "../docs/prometheus/qualifyd.rules.yml"); !bytes.Equal(got, want) {
		t.Errorf("%s is not docs/prometheus/qualifyd.rules.yml", rulesPath)
	}
	if got, want := readFile(t, grafana), readFile(t, "grafana/qualifyd.json"); !bytes.Equal(got, want) {
		t.Errorf("%s is not packaging/grafana/qualifyd.json", grafana)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkFields checks the control fields the package promises: a conffile,
// section and priority, and no dependency (the binary is static).
func checkFields(t *testing.T) {
	t.Helper()
	out := mustRun(t, "dpkg-query", "-W", "-f", "${Section} ${Priority} [${Depends}]\n${Conffiles}\n", "qualifyd")
	if !strings.HasPrefix(out, "net optional []\n") || !strings.Contains(out, " "+confPath+" ") {
		t.Errorf("dpkg-query: %q, want section net, priority optional, no Depends, conffile %s", out, confPath)
	}
	checkStatic(t, binPath)
}

// checkStatic checks that the ELF file at path asks for no dynamic loader.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
}

// checkUnit runs the installed unit's ExecStartPre= line, the check
// systemd runs before each start, checks that every program the unit
// starts is the packaged binary, and has systemd-analyze verify the unit
// (a missing systemd-analyze fails: `make deps` installs systemd).
func checkUnit(t *testing.T) {
	t.Helper()
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ExecStartPre=", "ExecStart="} {
		line := unitValue(string(unit), key)
		if !strings.HasPrefix(line, binPath+" ") {
			t.Errorf("%s: %s%q, want %s", unitPath, key, line, binPath)
		}
		if key == "ExecStartPre=" {
			args := strings.Fields(line)
			mustRun(t, args[0], args[1:]...)
		}
	}
	verifyUnit(t, unitPath)
	for _, want := range []string{"Type=notify", "WatchdogSec=", "DynamicUser=yes", "StateDirectory=qualifyd", "ProtectSystem=strict", "CapabilityBoundingSet=\n"} {
		if !strings.Contains(string(unit), "\n"+want) {
			t.Errorf("%s lacks %q", unitPath, want)
		}
	}
}

// checkGuardUnit checks qualifyd-guard.service: it starts the packaged
// binary's guard, which refuses the sample configuration (no
// method=maintenance sink: nothing to guard) with exit code 1, it never
// gives up restarting, and systemd-analyze verifies it.
func checkGuardUnit(t *testing.T) {
	t.Helper()
	unit := string(readFile(t, guardPath))
	line := unitValue(unit, "ExecStart=")
	if !strings.HasPrefix(line, binPath+" guard ") {
		t.Fatalf("%s: ExecStart=%q, want %s guard", guardPath, line, binPath)
	}
	args := strings.Fields(line)
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "nothing to guard") {
		t.Errorf("%s on the sample configuration: %v, %q; want exit 1, nothing to guard", line, err, out)
	}
	for _, want := range []string{"Restart=always", "StartLimitIntervalSec=0", "DynamicUser=yes", "ProtectSystem=strict"} {
		if !strings.Contains(unit, "\n"+want+"\n") {
			t.Errorf("%s lacks %q", guardPath, want)
		}
	}
	verifyUnit(t, guardPath)
}

// verifyUnit has systemd-analyze verify the unit at path. verify exits 0
// on unknown keys and bad values: any output fails.
func verifyUnit(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}

// need fails the test, before anything is installed, when prog is not on
// PATH: the test checks what it installed with it, and `make deps`
// installs pkg, Debian's package of prog.
func need(t *testing.T, prog, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(prog); err != nil {
		t.Fatalf("%s not found (%v): install %s (make deps)", prog, err, pkg)
	}
}

// unitValue is the value of the first line of unit that starts with key.
func unitValue(unit, key string) string {
	for line := range strings.Lines(unit) {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkMan checks that man finds qualifyd(8) (a missing man fails: `make
// deps` installs man-db) and that the page documents every command of
// `qualifyd help`.
func checkMan(t *testing.T) {
	t.Helper()
	if got := strings.TrimSpace(mustRun(t, "man", "-w", "qualifyd")); got != manPath {
		t.Errorf("man -w qualifyd = %q, want %s", got, manPath)
	}
	page := gunzip(t, manPath)
	help, err := output(binPath, "help")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := parseCommandList(help)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if !bytes.Contains(page, []byte("\n.SS "+roff(c.Name)+"\n")) {
			t.Errorf("%s: no section for command %q", manPath, c.Name)
		}
	}
	checkMan5(t)
}

// checkMan5 checks that man finds qualifyd.conf(5), renders it without a
// warning, and that it is the configuration reference, docs/configuration.md,
// as confManPage renders it (its header line, which holds the date, aside).
func checkMan5(t *testing.T) {
	t.Helper()
	if got := strings.TrimSpace(mustRun(t, "man", "-w", "5", "qualifyd.conf")); got != man5Path {
		t.Errorf("man -w 5 qualifyd.conf = %q, want %s", got, man5Path)
	}
	if out, err := exec.Command("man", "--warnings", "5", "qualifyd.conf").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("qualifyd.conf - qualifyd's configuration file")) {
		t.Errorf("man 5 qualifyd.conf: %v\n%.2000s", err, out)
	}
	md, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := confManPage(md, "V", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := bytes.Cut(gunzip(t, man5Path), []byte("\n"))
	if _, want, _ = bytes.Cut(want, []byte("\n")); !bytes.Equal(got, want) {
		t.Errorf("%s is not %s rendered", man5Path, referenceFile)
	}
}

// checkToken checks that the API token exists, for root only.
func checkToken(t *testing.T) {
	t.Helper()
	fi, err := os.Stat(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() < 32 {
		t.Errorf("%s: mode %v, %d bytes; want 0600 and a token", tokenPath, fi.Mode().Perm(), fi.Size())
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// status is dpkg's abbreviated status of qualifyd ("ii ", "rc ", ...), or
// "" when dpkg knows no such package or knows it as not installed.
func status(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "qualifyd").Output()
	st := string(out)
	if err != nil || st == "un " || st == "pn " {
		return ""
	}
	return st
}

func checkStatus(t *testing.T, want string) {
	t.Helper()
	if got := status(t); got != want {
		t.Fatalf("dpkg status of qualifyd = %q, want %q", got, want)
	}
}

func checkGone(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
}

func checkPresent(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// purge removes the package if a failed test left it installed.
func purge(t *testing.T) {
	if status(t) != "" {
		if out, err := exec.Command("dpkg", "-P", "qualifyd").CombinedOutput(); err != nil {
			t.Errorf("cleanup: dpkg -P qualifyd: %v\n%s", err, out)
		}
	}
}

// mustRun runs name with args, without standard input, and returns its
// standard output; a failure ends the test with both outputs.
func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
