package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// The live AoR of the stall test: one contact, its worst detection
// (qualify-semantics §7) F + T + (N-1)·(R + T) = 1 + 0.3 + 0.5 = 1.8 s.
const (
	liveOptions   = "qualify_frequency=1\nqualify_timeout=0.3\nqualify_failures=2\nqualify_retry_interval=0.2\n"
	liveDetection = 1800 * time.Millisecond
	// flapContacts flap with every probe: about 500 status changes a
	// second, each a contact line and an endpoint line.
	flapContacts = 1000
	// shutdownBound is SIGTERM's documented bound: the HTTP server's 5 s
	// for open requests, then 2 s for the log's last lines.
	shutdownBound = 7 * time.Second
)

// hookLevels is a webhook receiver that keeps the last state delivered
// per object, and when it arrived.
type hookLevels struct {
	mu   sync.Mutex
	last map[string]string    // "contact URI", "aor NAME", "endpoint NAME" -> to
	at   map[string]time.Time // the same keys -> when the last change of state arrived
}

func (h *hookLevels) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var c struct{ Kind, AoR, URI, Endpoint, To string }
	if err := json.NewDecoder(req.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := map[string]string{"contact": c.URI, "aor": c.AoR, "endpoint": c.Endpoint}[c.Kind]
	h.mu.Lock()
	defer h.mu.Unlock()
	if key := c.Kind + " " + name; h.last[key] != c.To {
		h.last[key], h.at[key] = c.To, time.Now()
	}
}

// changedAt returns when the last change of key's state arrived.
func (h *hookLevels) changedAt(key string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at[key]
}

// level returns the last state delivered for key.
func (h *hookLevels) level(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[key]
}

// TestStalledStdoutStallsNothing runs qualifyd with its stdout a pipe
// nobody reads (as when journald stalls), a thousand contacts flapping
// with every probe, and a Kamailio sink and a webhook sink following a
// live trunk (SIPp behind a relay, as Kamailio's dispatcher destination);
// and the same with stdout read, for the figure beside it. While stalled:
// the log drops lines and counts them; when the trunk dies, Kamailio sets
// it inactive and the webhook hears "down" within its detection + 1 s;
// the API's GET and POST routes answer, a POST /api/v1/reload and a
// SIGHUP apply; when the trunk comes back both routers hold the engine's
// levels again within the same bound; SIGTERM exits within the shutdown
// bound.
func TestStalledStdoutStallsNothing(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	for _, mode := range []string{"stalled", "read"} {
		t.Run(mode, func(t *testing.T) { stallRun(t, mode == "stalled") })
	}
}

// stallLab is the stall test's peers: the flapping responder, the live
// trunk in Kamailio's dispatcher, the webhook receiver, and qualifyd.
type stallLab struct {
	flap *responder.Responder
	live *trunk
	k    *kamailio
	hook *hookLevels
	conf string // qualifyd's configuration file
	body string // its text
	base string // qualifyd's HTTP API
	proc *exec.Cmd
	errs *peertest.Output // qualifyd's stderr, as written
	last *lastLine        // qualifyd's last line, when its stdout is read
}

// stallRun is one run of TestStalledStdoutStallsNothing, with stdout
// never read when stalled.
func stallRun(t *testing.T, stalled bool) {
	l := newStallLab(t)
	l.proc, l.errs, l.last = startStalled(t, stalled, "--config", l.conf, "--http", strings.TrimPrefix(l.base, "http://"), "--sip-bind", "127.0.0.1:0")
	step(t, "1 the trunk is up in both routers", func() { l.routersAre(t, "up", 30*time.Second) })
	step(t, "2 the flood", func() { l.flood(t, stalled) })
	mode := map[bool]string{true: "stalled", false: "read"}[stalled]
	step(t, "3 the trunk dies", func() { l.routersFollow(t, mode, "down", true) })
	step(t, "4 the API answers and reloads apply", func() { l.reloads(t) })
	step(t, "5 the trunk is back", func() { l.routersFollow(t, mode, "up", false) })
	step(t, "6 SIGTERM", func() { l.stop(t) })
	step(t, "7 the drop notice", func() { l.dropNotice(t, stalled) })
}

// dropNotice checks qualifyd's last line on stderr after its exit: with
// stdout stalled, the notice of the log lines dropped that the log never
// got (it could not reach the log); with stdout read, none.
func (l *stallLab) dropNotice(t *testing.T, stalled bool) {
	t.Helper()
	text := l.errs.String()
	last := text[strings.LastIndex(strings.TrimSuffix(text, "\n"), "\n")+1:]
	const notice = " log lines were dropped: the log's reader fell behind (qualifyd_log_lines_dropped_total)\n"
	if stalled != strings.HasSuffix(last, notice) {
		t.Fatalf("stdout stalled %v: stderr ends %q; want the drop notice there only when stalled", stalled, last)
	}
	t.Logf("stderr's last line: %q", last)
}

// newStallLab starts the peers and writes qualifyd's configuration.
func newStallLab(t *testing.T) *stallLab {
	t.Helper()
	// A coin per request: the probes go round in a fixed order, so a
	// counter's parity would give each contact the same answer each time.
	flap, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action {
		return responder.Action{Drop: rand.IntN(2) == 0}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flap.Close() })
	live := startTrunk(t, "live")
	l := &stallLab{flap: flap, live: live, k: startKamailio(t, live), hook: &hookLevels{last: map[string]string{}, at: map[string]time.Time{}},
		conf: filepath.Join(t.TempDir(), "qualifyd.conf"), base: fmt.Sprintf("http://127.0.0.1:%d", freePort(t, "tcp"))}
	srv := httptest.NewServer(l.hook)
	t.Cleanup(srv.Close)
	l.body = stallConfig(live.contact, flap.Addr().String(), l.k.rpc, srv.URL)
	writeFile(t, l.conf, l.body)
	return l
}

// routersFollow sets the live trunk dead (or alive again) and holds
// Kamailio and the webhook to having it level within its detection + 1 s,
// as the routers' own records date it: the first reply of Kamailio's
// dispatcher.list that reads the new state (sampled every 20 ms) and the
// arrival of the webhook's last delivery for each of the trunk's
// objects. The test's own polling, slower on a loaded host, only waits.
func (l *stallLab) routersFollow(t *testing.T, mode, level string, dead bool) {
	t.Helper()
	bound := liveDetection + time.Second
	s := l.k.watch(l.live.dest)
	at := time.Now() // no later than the first probe the relay drops (or answers)
	l.live.relay.setDead(dead)
	l.routersAre(t, level, peerBound)
	took := s.first(t, l.live.dest, map[string]string{"up": "A", "down": "I"}[level], at).Sub(at)
	hook := time.Duration(0)
	for _, key := range []string{"contact " + l.live.contact, "aor live", "endpoint live"} {
		hook = max(hook, l.hook.changedAt(key).Sub(at))
	}
	t.Logf("stdout %s: trunk %s in Kamailio %v and in the webhook %v after the relay's change (detection %v)",
		mode, level, took.Round(time.Millisecond), hook.Round(time.Millisecond), liveDetection)
	if took > bound || hook > bound {
		t.Fatalf("stdout %s: Kamailio had the trunk %s %v, the webhook %v after the change, want both within detection %v + 1 s",
			mode, level, took, hook, liveDetection)
	}
}

// routersAre waits at most bound until the engine has the live trunk
// Reachable (level up) or Unreachable (down), Kamailio has it active or
// inactive, and the webhook's last contact, AoR and endpoint states are
// level.
func (l *stallLab) routersAre(t *testing.T, level string, bound time.Duration) {
	t.Helper()
	status, flag := map[string]string{"up": "Reachable", "down": "Unreachable"}[level], map[string]string{"up": "A", "down": "I"}[level]
	eventually(t, bound, "the engine, Kamailio and the webhook have the live trunk "+level, func() bool {
		_, aor := get(t, "GET", l.base+"/api/v1/aors/live", "")
		return strings.Contains(aor, `"status":"`+status+`"`) && l.k.state(l.live.dest) == flag &&
			l.hook.level("contact "+l.live.contact) == level && l.hook.level("aor live") == level && l.hook.level("endpoint live") == level
	})
}

// flood waits until the flapping contacts have filled the log: lines
// dropped when stalled, thousands of status changes when read.
func (l *stallLab) flood(t *testing.T, stalled bool) {
	t.Helper()
	if stalled {
		eventually(t, 120*time.Second, "the log drops lines", func() bool { return metric(t, l.base, "qualifyd_log_lines_dropped_total") > 0 })
		return
	}
	eventually(t, 120*time.Second, "status changes flood", func() bool {
		return metric(t, l.base, `qualifyd_status_changes_total{from="Reachable",to="Unreachable"}`) > 4*flapContacts
	})
}

// reloads checks a GET route, then reloads twice, through the API and by
// SIGHUP, each adding an AoR the API then shows.
func (l *stallLab) reloads(t *testing.T) {
	t.Helper()
	if code, got := get(t, "GET", l.base+"/api/v1/contacts?limit=1", ""); code != 200 {
		t.Fatalf("GET /api/v1/contacts: %d %s", code, got)
	}
	writeFile(t, l.conf, l.body+"\n[extra1]\ntype=aor\ncontact=sip:extra1@127.0.0.1:9\nqualify_frequency=60\n")
	if code, got := get(t, "POST", l.base+"/api/v1/reload", ""); code != 200 {
		t.Fatalf("POST /api/v1/reload: %d %s", code, got)
	}
	if code, _ := get(t, "GET", l.base+"/api/v1/aors/extra1", ""); code != 200 {
		t.Fatalf("the API's reload did not apply: GET /api/v1/aors/extra1 %d", code)
	}
	writeFile(t, l.conf, l.body+"\n[extra2]\ntype=aor\ncontact=sip:extra2@127.0.0.1:9\nqualify_frequency=60\n")
	if err := l.proc.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "SIGHUP's reload applies", func() bool {
		code, _ := get(t, "GET", l.base+"/api/v1/aors/extra2", "")
		return code == 200
	})
}

// stop sends SIGTERM and waits at most shutdownBound for a clean exit.
func (l *stallLab) stop(t *testing.T) {
	t.Helper()
	stopped := time.Now()
	if err := l.proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- l.proc.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		t.Logf("SIGTERM: exited after %v%s", time.Since(stopped).Round(time.Millisecond), l.last.since(stopped))
	case <-time.After(shutdownBound):
		// SIGQUIT makes the Go runtime print every goroutine's stack on
		// stderr and exit: where the shutdown is stuck. The process is
		// reaped here, not by the cleanup's Wait, which would race this
		// one.
		_ = l.proc.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = l.proc.Process.Kill()
			<-exited
		}
		t.Fatalf("SIGTERM: still running after %v%s; its stderr, with the stacks of SIGQUIT:\n%s", shutdownBound, l.last.since(stopped), l.errs.String())
	}
}

// stallConfig is the stall test's configuration: the live trunk with its
// endpoint, followed by a Kamailio sink at rpc and a webhook sink at
// hook, and flapContacts AoRs of one contact each on flap, each with an
// endpoint, flapping with every probe.
func stallConfig(liveURI, flap, rpc, hook string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[live]\ntype=aor\ncontact=%s\n%s\n[live]\ntype=endpoint\naors=live\n\n", liveURI, liveOptions)
	fmt.Fprintf(&b, "[edge]\ntype=sink\ndriver=kamailio\nurl=%s\naors=live\ntimeout=2\n\n", rpc)
	fmt.Fprintf(&b, "[hook]\ntype=sink\ndriver=webhook\nurl=%s\naors=live\ntimeout=2\n\n", hook)
	for i := range flapContacts {
		fmt.Fprintf(&b, "[f%04d]\ntype=aor\ncontact=sip:f%04d@%s\nqualify_frequency=1\nqualify_timeout=0.2\nqualify_failures=1\n\n"+
			"[f%04d]\ntype=endpoint\naors=f%04d\n\n", i, i, flap, i, i)
	}
	return b.String()
}

// lastLine keeps the last line a reader read.
type lastLine struct {
	mu   sync.Mutex
	line string
}

// read keeps each line of r in turn until r ends.
func (l *lastLine) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.line = sc.Text()
		l.mu.Unlock()
	}
}

// since describes the last line (nil: stdout not read) as qualifyd
// stamped it, relative to t: where a slow stop spent its time.
func (l *lastLine) since(t time.Time) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	line := l.line
	l.mu.Unlock()
	at, err := parseStamp(line)
	if err != nil {
		return fmt.Sprintf("; its last line: %q", line)
	}
	return fmt.Sprintf("; its last line, stamped %v after SIGTERM: %q", at.Sub(t).Round(time.Millisecond), line)
}

// startStalled runs `qualifyd run args` with its stdout a pipe that is
// never read when stalled (its read end kept open, so writes block once
// the pipe's 64 KiB are full), and read (its last line kept) otherwise.
// The test fails if the process is still running at its end. It returns
// the process, its stderr, which also goes to the test's, and its
// stdout's last line (nil when stalled).
func startStalled(t *testing.T, stalled bool, args ...string) (*exec.Cmd, *peertest.Output, *lastLine) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"run"}, args...)...)
	errs := &peertest.Output{}
	cmd.Stdout, cmd.Stderr = w, io.MultiWriter(os.Stderr, errs)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var last *lastLine
	if !stalled {
		last = &lastLine{}
		go last.read(r)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); r.Close() })
	base := "http://" + args[slices.Index(args, "--http")+1]
	eventually(t, 30*time.Second, "the API answers", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return cmd, errs, last
}

// metric returns the value of the series (name with its labels, as
// exposed) at base's /metrics; 0 when absent.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	_, body := get(t, "GET", base+"/metrics", "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
