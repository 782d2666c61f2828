package main

import (
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
// per object and when each contact state arrived.
type hookLevels struct {
	mu      sync.Mutex
	last    map[string]string    // "contact URI", "aor NAME", "endpoint NAME" -> to
	arrived map[string]time.Time // "URI to" -> first arrival
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
	h.last[c.Kind+" "+name] = c.To
	if _, ok := h.arrived[name+" "+c.To]; !ok && c.Kind == "contact" {
		h.arrived[name+" "+c.To] = time.Now()
	}
}

// level returns the last state delivered for key.
func (h *hookLevels) level(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[key]
}

// forget drops the arrival of uri's state to, so that the next one is
// timed.
func (h *hookLevels) forget(uri, to string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.arrived, uri+" "+to)
}

// arrival returns when uri's state to arrived, if it did.
func (h *hookLevels) arrival(uri, to string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.arrived[uri+" "+to]
	return at, ok
}

// TestStalledStdoutStallsNothing runs qualifyd with its stdout a pipe
// nobody reads (as when journald stalls), a thousand contacts flapping
// with every probe and a webhook sink following a live trunk; and the
// same with stdout read, for the figure beside it. While stalled: the
// log drops lines and counts them; when the live peer dies the webhook
// hears "down" within its detection + 1 s; the API's GET and POST routes
// answer, a POST /api/v1/reload and a SIGHUP apply; when the peer comes
// back the webhook holds the engine's levels again; SIGTERM exits within
// the shutdown bound.
func TestStalledStdoutStallsNothing(t *testing.T) {
	for _, mode := range []string{"stalled", "read"} {
		t.Run(mode, func(t *testing.T) { stallRun(t, mode == "stalled") })
	}
}

// stallRun is one run of TestStalledStdoutStallsNothing, with stdout
// never read when stalled.
func stallRun(t *testing.T, stalled bool) {
	// A coin per request: the probes go round in a fixed order, so a
	// counter's parity would give each contact the same answer each time.
	flap, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action {
		return responder.Action{Drop: rand.IntN(2) == 0}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer flap.Close()
	live, err := responder.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	liveAddr := live.Addr().String()
	defer func() { live.Close() }()
	hook := &hookLevels{last: map[string]string{}, arrived: map[string]time.Time{}}
	srv := httptest.NewServer(hook)
	defer srv.Close()

	liveURI := "sip:live@" + liveAddr
	conf := filepath.Join(t.TempDir(), "qualifyd.conf")
	body := stallConfig(liveURI, flap.Addr().String(), srv.URL)
	writeFile(t, conf, body)
	base := fmt.Sprintf("http://127.0.0.1:%d", freePort(t, "tcp"))
	proc := startStalled(t, stalled, "--config", conf, "--http", strings.TrimPrefix(base, "http://"), "--sip-bind", "127.0.0.1:0")

	eventually(t, 30*time.Second, "the webhook hears the live contact up", func() bool { return hook.level("contact "+liveURI) == "up" })
	if stalled {
		eventually(t, 120*time.Second, "the log drops lines", func() bool { return metric(t, base, "qualifyd_log_lines_dropped_total") > 0 })
	} else {
		eventually(t, 120*time.Second, "status changes flood", func() bool {
			return metric(t, base, `qualifyd_status_changes_total{from="Reachable",to="Unreachable"}`) > 4*flapContacts
		})
	}

	hook.forget(liveURI, "down")
	died := time.Now()
	live.Close()
	eventually(t, liveDetection+time.Second, "the webhook hears the dead peer down within detection + 1 s", func() bool {
		_, ok := hook.arrival(liveURI, "down")
		return ok
	})
	at, _ := hook.arrival(liveURI, "down")
	t.Logf("stdout %s: the router heard the dead peer after %v (detection %v)", map[bool]string{true: "stalled", false: "read"}[stalled],
		at.Sub(died).Round(time.Millisecond), liveDetection)

	if code, got := get(t, "GET", base+"/api/v1/aors/live", ""); code != 200 || !strings.Contains(got, `"status":"Unreachable"`) {
		t.Fatalf("GET /api/v1/aors/live: %d %s", code, got)
	}
	writeFile(t, conf, body+"\n[extra1]\ntype=aor\ncontact=sip:extra1@127.0.0.1:9\nqualify_frequency=60\n")
	if code, got := get(t, "POST", base+"/api/v1/reload", ""); code != 200 {
		t.Fatalf("POST /api/v1/reload: %d %s", code, got)
	}
	if code, _ := get(t, "GET", base+"/api/v1/aors/extra1", ""); code != 200 {
		t.Fatalf("the API's reload did not apply: GET /api/v1/aors/extra1 %d", code)
	}
	writeFile(t, conf, body+"\n[extra2]\ntype=aor\ncontact=sip:extra2@127.0.0.1:9\nqualify_frequency=60\n")
	if err := proc.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "SIGHUP's reload applies", func() bool {
		code, _ := get(t, "GET", base+"/api/v1/aors/extra2", "")
		return code == 200
	})

	if live, err = responder.Listen(liveAddr, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, liveDetection+time.Second, "the webhook holds the engine's levels once the peer is back", func() bool {
		_, aor := get(t, "GET", base+"/api/v1/aors/live", "")
		return strings.Contains(aor, `"status":"Reachable"`) && hook.level("contact "+liveURI) == "up" &&
			hook.level("aor live") == "up" && hook.level("endpoint live") == "up"
	})

	stopped := time.Now()
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		t.Logf("SIGTERM: exited after %v", time.Since(stopped).Round(time.Millisecond))
	case <-time.After(shutdownBound):
		t.Fatalf("SIGTERM: still running after %v", shutdownBound)
	}
}

// stallConfig is the stall test's configuration: the live trunk with its
// endpoint, followed by a webhook sink at hook, and flapContacts AoRs of
// one contact each on flap, each with an endpoint, flapping with every
// probe.
func stallConfig(liveURI, flap, hook string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[live]\ntype=aor\ncontact=%s\n%s\n[live]\ntype=endpoint\naors=live\n\n", liveURI, liveOptions)
	fmt.Fprintf(&b, "[hook]\ntype=sink\ndriver=webhook\nurl=%s\naors=live\ntimeout=2\n\n", hook)
	for i := range flapContacts {
		fmt.Fprintf(&b, "[f%04d]\ntype=aor\ncontact=sip:f%04d@%s\nqualify_frequency=1\nqualify_timeout=0.2\nqualify_failures=1\n\n"+
			"[f%04d]\ntype=endpoint\naors=f%04d\n\n", i, i, flap, i, i)
	}
	return b.String()
}

// startStalled runs `qualifyd run args` with its stdout a pipe that is
// never read when stalled (its read end kept open, so writes block once
// the pipe's 64 KiB are full), and drained otherwise. The test fails if
// the process is still running at its end.
func startStalled(t *testing.T, stalled bool, args ...string) *exec.Cmd {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"run"}, args...)...)
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !stalled {
		go io.Copy(io.Discard, r)
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
	return cmd
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
