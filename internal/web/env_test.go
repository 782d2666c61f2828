package web

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// reply is what the fake peer does with a probe.
type reply = enginetest.Reply

// fakeProber answers each URI as its script says (200 after 12.5 ms when
// the URI has no entry). Safe for concurrent use.
type fakeProber struct {
	mu     sync.Mutex
	script map[string]reply
}

func (f *fakeProber) set(uri string, r reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[uri] = r
}

func (f *fakeProber) Start(ctx context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	f.mu.Lock()
	r, ok := f.script[t.URI]
	f.mu.Unlock()
	if !ok {
		r = reply{After: 12500 * time.Microsecond}
	}
	enginetest.Start(ctx, t, r, tag, done)
}

// env is an engine with a fake prober and a Server with its pump, inside a
// synctest bubble.
type env struct {
	t      *testing.T
	t0     time.Time
	e      *engine.Engine
	srv    *Server
	h      http.Handler
	prober *fakeProber
}

// newEnv starts the engine and the pump, then applies aors. Call it inside
// synctest.Test.
func newEnv(t *testing.T, cfg Config, ecfg engine.Config, aors ...engine.AoR) *env {
	t.Helper()
	v := &env{t: t, t0: time.Now(), prober: &fakeProber{script: map[string]reply{}}}
	ecfg.Prober = v.prober
	ecfg.Rand = func() float64 { return 0 }
	e, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v.e, v.srv, v.h = e, srv, srv.Handler()
	v.start(t)
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	return v
}

// start runs the engine and the pump until the test ends.
func (v *env) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { v.e.Run(ctx) })
	wg.Go(func() { v.srv.Run(ctx) })
	synctest.Wait()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// until advances virtual time to offset d from t0 and lets everything
// settle.
func (v *env) until(d time.Duration) {
	time.Sleep(v.t0.Add(d).Sub(time.Now()))
	synctest.Wait()
}

// do serves one request; header is name, value pairs.
func (v *env) do(method, target string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	v.h.ServeHTTP(w, r)
	return w
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (rerun with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// response renders a reply for a golden file: status, content type, and
// the body (JSON indented).
func response(t *testing.T, w *httptest.ResponseRecorder) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(w.Result().Status + "\nContent-Type: " + w.Header().Get("Content-Type") + "\n\n")
	body := w.Body.Bytes()
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if err := json.Indent(&b, body, "", "  "); err != nil {
			t.Fatalf("invalid JSON %q: %v", body, err)
		}
		return b.Bytes()
	}
	b.Write(body)
	return b.Bytes()
}

// decode unmarshals a JSON reply into v.
func decode(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("reply %q: %v", w.Body.String(), err)
	}
}

// Contacts of the reference scenario.
const (
	pbx07URI = "sip:pbx07@192.0.2.7:5060"
	gw2URI   = "sip:gw2@198.51.100.2"
	gw3URI   = "sip:gw3@198.51.100.3"
	bakURI   = "sip:backup@198.51.100.9"
	phoneURI = "sip:phone@203.0.113.9"
)

// scenario returns four AoRs: pbx07 healthy with the contract's reference
// policy; carrier with a silent and a 503 contact (qualify_2xx_only,
// unavailable); backup latency-only and silent; phone with qualify off.
func scenario() []engine.AoR {
	return []engine.AoR{
		{Name: "pbx07", Contacts: []string{pbx07URI}, Policy: &qualify.Policy{
			Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second}},
		{Name: "carrier", Contacts: []string{gw2URI, gw3URI}, Policy: &qualify.Policy{
			Frequency: 60 * time.Second, Timeout: 2 * time.Second, Only2xx: true, Successes: 2, DownInterval: 10 * time.Second}},
		{Name: "backup", Contacts: []string{bakURI}, Policy: &qualify.Policy{
			Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 2, RetryInterval: 2 * time.Second, LatencyOnly: true}},
		{Name: "phone", Contacts: []string{phoneURI}, Policy: new(qualify.DefaultPolicy())},
	}
}

// scenarioEnv runs the scenario until 9 s: every contact has had its
// first verdict, none is in flight.
func scenarioEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	return scenarioEnvOf(t, cfg, engine.Config{})
}

// scenarioEnvOf is scenarioEnv with the engine's configuration ecfg.
func scenarioEnvOf(t *testing.T, cfg Config, ecfg engine.Config) *env {
	t.Helper()
	v := newEnv(t, cfg, ecfg)
	v.playScenario()
	return v
}

// playScenario applies scenario() with its peers' answers and runs it to
// 9 s.
func (v *env) playScenario() {
	v.t.Helper()
	v.prober.set(gw2URI, reply{Silent: true})
	v.prober.set(gw3URI, reply{After: 5 * time.Millisecond, Code: 503})
	v.prober.set(bakURI, reply{Silent: true})
	if err := v.e.Apply(scenario()); err != nil {
		v.t.Fatal(err)
	}
	v.until(9 * time.Second)
}
