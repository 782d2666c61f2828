package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// TestSinksFollowTheEngine runs a daemon whose one contact answers, with
// a webhook sink: the contact, its AoR and its endpoint are delivered
// up, and the API and the metrics show the pushes.
func TestSinksFollowTheEngine(t *testing.T) {
	r, err := responder.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan map[string]any, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var c map[string]any
		json.NewDecoder(req.Body).Decode(&c)
		got <- c
	}))
	defer hook.Close()
	uri := "sip:pbx07@" + r.Addr().String()
	conf := &pjsip.Config{
		AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "pbx07", Contacts: []string{uri},
			Policy: &qualify.Policy{Frequency: time.Second, Timeout: time.Second}}}},
		Endpoints: []pjsip.Endpoint{{Name: "trunk", AoRs: []string{"pbx07"}}},
		Sinks:     []*pjsip.Sink{{Name: "alerts", Driver: "webhook", URL: hook.URL, Secret: "k", Timeout: 5 * time.Second}},
	}
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	kinds := map[string]string{}
	for range 3 {
		c := <-got
		kinds[c["kind"].(string)] = c["to"].(string)
	}
	if kinds["contact"] != "up" || kinds["aor"] != "up" || kinds["endpoint"] != "up" {
		t.Fatalf("delivered %v", kinds)
	}
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
	r, err := responder.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan map[string]any, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var c map[string]any
		json.NewDecoder(req.Body).Decode(&c)
		got <- c
	}))
	defer hook.Close()
	conf := &pjsip.Config{
		AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "pbx07", Contacts: []string{"sip:pbx07@" + r.Addr().String()},
			Policy: &qualify.Policy{Frequency: time.Second, Timeout: time.Second}}}},
		Endpoints: []pjsip.Endpoint{{Name: "trunk", AoRs: []string{"pbx07"}}},
		Sinks:     []*pjsip.Sink{{Name: "alerts", Driver: "webhook", URL: hook.URL, Timeout: 5 * time.Second}},
	}
	stdout := &stalledWriter{release: make(chan struct{})}
	defer close(stdout.release)
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0", Log: stdout, logBuffer: 200})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	kinds := map[string]string{}
	for range 3 {
		c := <-got
		kinds[c["kind"].(string)] = c["to"].(string)
	}
	if kinds["contact"] != "up" || kinds["aor"] != "up" || kinds["endpoint"] != "up" {
		t.Fatalf("delivered %v", kinds)
	}
	if err := d.Reload(ctx, false); err != nil {
		t.Fatal(err)
	}
	if m := fetch(t, d.URL()+"/metrics"); !regexp.MustCompile(`(?m)^qualifyd_log_lines_dropped_total [1-9]`).MatchString(m) {
		t.Fatalf("metrics without dropped log lines:\n%s", m)
	}
	cancel()
	if err := <-done; err != nil {
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
