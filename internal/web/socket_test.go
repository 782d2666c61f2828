package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestStreamOverSocket runs the event stream through a real http.Server
// with NewHTTPServer's timeouts: the response headers and each event must
// reach the client as they happen (flushed), through the recover wrapper.
// It reads without deadlines: a missing flush hangs the test and fails it.
func TestStreamOverSocket(t *testing.T) {
	e, err := engine.New(engine.Config{Prober: &fakeProber{script: map[string]reply{}}, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	hs := NewHTTPServer("", nil)
	ts.Config.ReadHeaderTimeout, ts.Config.WriteTimeout = hs.ReadHeaderTimeout, hs.WriteTimeout
	ts.Start()
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { e.Run(ctx) })
	wg.Go(func() { srv.Run(ctx) })

	resp, err := http.Get(ts.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	policy := qualify.Policy{Frequency: 60 * time.Second, Timeout: time.Second}
	if err := e.Apply([]engine.AoR{{Name: "pbx07", Contacts: []string{pbx07URI}, Policy: &policy}}); err != nil {
		t.Fatal(err)
	}
	frame := readFrame(t, bufio.NewReader(resp.Body))
	if !strings.HasPrefix(frame, "id: 1\nevent: status\ndata: {") || !strings.Contains(frame, `"to":"Reachable"`) {
		t.Fatalf("frame %q", frame)
	}
}

// readFrame reads one SSE frame, up to its blank line.
func readFrame(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", b.String(), err)
		}
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}
