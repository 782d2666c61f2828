package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// hookState is a webhook receiver's view: each contact's last "to", and
// whether it came with "panic".
type hookState struct {
	mu      sync.Mutex
	to      map[string]string
	panic   map[string]bool
	changed chan struct{}
}

func newHook() (*hookState, *httptest.Server) {
	h := &hookState{to: map[string]string{}, panic: map[string]bool{}, changed: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			Kind, AoR, To string
			Panic         bool
		}
		json.NewDecoder(r.Body).Decode(&c)
		if c.Kind != "contact" {
			return
		}
		h.mu.Lock()
		h.to[c.AoR], h.panic[c.AoR] = c.To, c.Panic
		h.mu.Unlock()
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}))
	return h, srv
}

// levels is the receiver's view of trunk0..n-1: "U" up, "D" down, "?"
// nothing yet.
func (h *hookState) levels(n int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("trunk%d", i)
		switch {
		case h.to[name] == "up":
			b.WriteByte('U')
		case h.to[name] == "down":
			b.WriteByte('D')
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// await waits until the receiver's view of n trunks is want, or fails
// after a deadline; every change is a delivery from the daemon.
func (h *hookState) await(t *testing.T, n int, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for h.levels(n) != want {
		select {
		case <-h.changed:
		case <-deadline:
			t.Fatalf("the receiver holds %s, want %s", h.levels(n), want)
		}
	}
}

// TestPanicThroughTheDaemon runs a daemon over 10 trunks to 10 SIP peers
// on loopback with a webhook sink (N=2, R=3 s): one trunk down is pushed
// down; five more failing a first probe make a panic before any of them
// is down: trunk0 stays down, the five are never pushed down while the
// API shows them Unreachable and says the panic; once they answer again
// the panic ends and the receiver never saw them down.
func TestPanicThroughTheDaemon(t *testing.T) {
	const n = 10
	policy := &qualify.Policy{Frequency: time.Second, Timeout: 300 * time.Millisecond, Failures: 2, RetryInterval: 3 * time.Second, Successes: 1}
	down, aors := trunkPeers(t, n, policy)
	hook, srv := newHook()
	defer srv.Close()
	conf := &pjsip.Config{AoRs: aors, Panic: pjsip.Panic{Threshold: 50, MinDestinations: 10},
		Sinks: []*pjsip.Sink{{Name: "hook", Driver: "webhook", URL: srv.URL, Timeout: 5 * time.Second}}}
	d := runDaemon(t, Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	hook.await(t, n, "UUUUUUUUUU")
	down[0].Store(true)
	hook.await(t, n, "DUUUUUUUUU") // a single trunk's outage is pushed
	for i := 1; i <= 5; i++ {
		down[i].Store(true)
	}
	waitUnreachable(t, d, 6)
	if got := hook.levels(n); got != "DUUUUUUUUU" {
		t.Fatalf("the receiver holds %s during the panic, want trunk0 alone down", got)
	}
	if body := fetch(t, d.URL()+"/api/v1/sinks"); !strings.Contains(body, `"panic":{"active":true,`) || !strings.Contains(body, `"destinations":10,"failing":6,"down":6,`) ||
		!strings.Contains(body, `"held":10,`) { // 5 contacts and their 5 AoRs
		t.Fatalf("sinks %s", body)
	}
	m := fetch(t, d.URL()+"/metrics")
	if !strings.Contains(m, "\nqualifyd_panic 1\n") {
		t.Fatal("qualifyd_panic is not 1")
	}
	if strings.Contains(m, "qualifyd_cluster_") {
		t.Error("a single node exports qualifyd_cluster_ series")
	}
	for i := 1; i <= 5; i++ {
		down[i].Store(false)
	}
	waitUnreachable(t, d, 1)
	if m := fetch(t, d.URL()+"/metrics"); !strings.Contains(m, "\nqualifyd_panic 0\n") {
		t.Fatal("qualifyd_panic is not 0 after the panic")
	}
	if got := hook.levels(n); got != "DUUUUUUUUU" {
		t.Fatalf("the receiver holds %s after the panic, want trunk0 alone down", got)
	}
}

// trunkPeers starts n SIP peers on loopback, each silent while its down
// flag is set, and returns the flags and the AoRs trunk0.. to them.
func trunkPeers(t *testing.T, n int, policy *qualify.Policy) ([]atomic.Bool, []pjsip.AoR) {
	down := make([]atomic.Bool, n)
	var aors []pjsip.AoR
	for i := range n {
		r, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action {
			return responder.Action{Drop: down[i].Load()}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		name := fmt.Sprintf("trunk%d", i)
		aors = append(aors, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{"sip:" + name + "@" + r.Addr().String()}, Policy: policy}})
	}
	return down, aors
}

// TestPanicWaitThroughTheDaemon runs a daemon over 10 trunks on loopback
// with a webhook sink (N=1, F=1 s, T=300 ms, qualify_down_interval 10 s:
// H = 10.3 s): three trunks really going down make 30% recently failing,
// above the lower mark and short of a panic. The API and the metrics say
// the downs wait (for as long as the three began failing within H: the
// headroom of a loaded machine), and the receiver gets all three down
// once their wait is over (how long after the API showed them
// Unreachable is logged).
func TestPanicWaitThroughTheDaemon(t *testing.T) {
	const n = 10
	policy := &qualify.Policy{Frequency: time.Second, Timeout: 300 * time.Millisecond, Failures: 1, DownInterval: 10 * time.Second, Successes: 1}
	down, aors := trunkPeers(t, n, policy)
	hook, srv := newHook()
	defer srv.Close()
	conf := &pjsip.Config{AoRs: aors, Panic: pjsip.Panic{Threshold: 50, MinDestinations: 10, HoldThreshold: 10},
		Sinks: []*pjsip.Sink{{Name: "hook", Driver: "webhook", URL: srv.URL, Timeout: 5 * time.Second}}}
	d := runDaemon(t, Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	hook.await(t, n, "UUUUUUUUUU")
	for i := range 3 {
		down[i].Store(true)
	}
	waitUnreachable(t, d, 3)
	if body := fetch(t, d.URL()+"/api/v1/sinks"); !strings.Contains(body, `"waiting":true,"destinations":10,"failing":3,"down":3,"recent":3,`) ||
		!strings.Contains(body, `"hold_threshold":10,"hold_seconds":10.3}`) {
		t.Fatalf("sinks %s: want the downs waiting", body)
	}
	if m := fetch(t, d.URL()+"/metrics"); !strings.Contains(m, "\nqualifyd_panic_waiting 1\n") || !strings.Contains(m, "\nqualifyd_panic 0\n") {
		t.Fatal("qualifyd_panic_waiting is not 1, or qualifyd_panic not 0")
	}
	start := time.Now()
	for hook.levels(n) != "DDDUUUUUUU" {
		select {
		case <-hook.changed:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver holds %s, want the three down after their wait", hook.levels(n))
		}
	}
	t.Logf("the receiver had the three down %v after the API showed them Unreachable (H = 10.3 s from each one's verdict, plus the one-second recheck)", time.Since(start).Round(time.Millisecond))
}

// waitUnreachable waits until the API shows n contacts Unreachable, or
// fails after a deadline of a loaded machine's headroom.
func waitUnreachable(t *testing.T, d *Daemon, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		body := fetch(t, d.URL()+"/api/v1/contacts?status=Unreachable")
		if strings.Count(body, `"status":"Unreachable"`) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API shows %d contacts Unreachable, want %d", strings.Count(body, `"status":"Unreachable"`), n)
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestReloadReleasesARemovedSink: a reload that drops a sink has it push
// up what its receiver holds down (a webhook: removed) before it stops.
func TestReloadReleasesARemovedSink(t *testing.T) {
	r, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action { return responder.Action{Drop: true} })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hook, srv := newHook()
	defer srv.Close()
	policy := &qualify.Policy{Frequency: time.Second, Timeout: 300 * time.Millisecond, Failures: 1, Successes: 1}
	aors := []pjsip.AoR{{AoR: probe.AoR{Name: "trunk0", Contacts: []string{"sip:trunk0@" + r.Addr().String()}, Policy: policy}}}
	var mu sync.Mutex
	conf := &pjsip.Config{AoRs: aors, Sinks: []*pjsip.Sink{{Name: "hook", Driver: "webhook", URL: srv.URL, Timeout: 5 * time.Second}}}
	load := func() (*pjsip.Config, error) { mu.Lock(); defer mu.Unlock(); return conf, nil }
	log := &lockedWriter{wrote: make(chan struct{}, 1)}
	d := runDaemon(t, Config{Load: load, SIPBind: "127.0.0.1:0", Log: log})
	hook.await(t, 1, "D")
	mu.Lock()
	conf = &pjsip.Config{AoRs: aors}
	mu.Unlock()
	hook.mu.Lock()
	hook.to["trunk0"] = "" // wait for the release's delivery
	hook.mu.Unlock()
	if err := d.Reload(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		hook.mu.Lock()
		to := hook.to["trunk0"]
		hook.mu.Unlock()
		if to == "removed" {
			break
		}
		select {
		case <-hook.changed:
		case <-deadline:
			t.Fatalf("the receiver holds %q, want removed", to)
		}
	}
	for !strings.Contains(log.String(), "qualifyd: sink hook: stopped: released 2 objects the router may hold down (pushed up)\n") {
		select {
		case <-deadline:
			t.Fatalf("log %s", log.String())
		case <-log.wrote:
		}
	}
}

// runDaemon builds a daemon of cfg and runs it until the test ends.
func runDaemon(t *testing.T, cfg Config) *Daemon {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// lockedWriter is a log that says when it was written to.
type lockedWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
