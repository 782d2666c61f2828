package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// webhookDaemon starts a daemon, with cfg's log, whose one contact
// answers, with a webhook sink; it returns the daemon, what the webhook
// receives, and a stop that cancels Run and returns its error.
func webhookDaemon(t *testing.T, cfg Config) (*Daemon, <-chan map[string]any, func() error) {
	t.Helper()
	r, err := responder.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	got := make(chan map[string]any, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var c map[string]any
		json.NewDecoder(req.Body).Decode(&c)
		got <- c
	}))
	t.Cleanup(hook.Close)
	conf := &pjsip.Config{
		AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "pbx07", Contacts: []string{"sip:pbx07@" + r.Addr().String()},
			Policy: &qualify.Policy{Frequency: time.Second, Timeout: time.Second}}}},
		Endpoints: []pjsip.Endpoint{{Name: "trunk", AoRs: []string{"pbx07"}}},
		Sinks:     []*pjsip.Sink{{Name: "alerts", Driver: "webhook", URL: hook.URL, Secret: "k", Timeout: 5 * time.Second}},
	}
	cfg.Load, cfg.SIPBind, cfg.HTTPAddr = func() (*pjsip.Config, error) { return conf, nil }, "127.0.0.1:0", "127.0.0.1:0"
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error { once.Do(func() { cancel(); runErr = <-done }); return runErr }
	t.Cleanup(func() { stop() })
	return d, got, stop
}

// expectUp reads the webhook's first three deliveries: the contact, its
// AoR and its endpoint, each up.
func expectUp(t *testing.T, got <-chan map[string]any) {
	t.Helper()
	kinds := map[string]string{}
	for range 3 {
		c := <-got
		kinds[c["kind"].(string)] = c["to"].(string)
	}
	if kinds["contact"] != "up" || kinds["aor"] != "up" || kinds["endpoint"] != "up" {
		t.Fatalf("delivered %v", kinds)
	}
}

// TestSinksFollowTheEngine runs a daemon whose one contact answers, with
// a webhook sink: the contact, its AoR and its endpoint are delivered
// up, and the API and the metrics show the pushes.
func TestSinksFollowTheEngine(t *testing.T) {
	d, got, _ := webhookDaemon(t, Config{})
	expectUp(t, got)
	body := fetch(t, d.URL()+"/api/v1/sinks")
	if !strings.Contains(body, `"name":"alerts","driver":"webhook"`) || !strings.Contains(body, `"objects":3`) {
		t.Fatalf("sinks %s", body)
	}
	if m := fetch(t, d.URL()+"/metrics"); !strings.Contains(m, `qualifyd_sink_up{sink="alerts"}`) {
		t.Fatalf("metrics without the sink series")
	}
}

// TestSinksFollowWhileTheLogStalls: with the log's writer blocked
// forever in its first write (a stdout nobody reads) and a small buffer,
// the webhook still hears the contact, its AoR and its endpoint up, a
// reload returns, the API answers, the dropped lines are counted, and
// Run returns once its context ends.
func TestSinksFollowWhileTheLogStalls(t *testing.T) {
	stdout := &stalledWriter{release: make(chan struct{})}
	t.Cleanup(func() { close(stdout.release) }) // after stop: the cleanups run last first
	d, got, stop := webhookDaemon(t, Config{Log: stdout, logBuffer: 200})
	expectUp(t, got)
	if err := d.Reload(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if m := fetch(t, d.URL()+"/metrics"); !regexp.MustCompile(`(?m)^qualifyd_log_lines_dropped_total [1-9]`).MatchString(m) {
		t.Fatalf("metrics without dropped log lines:\n%s", m)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
