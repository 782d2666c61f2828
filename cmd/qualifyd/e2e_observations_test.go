package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// postJSON posts body to url with the bearer token and returns the
// status code and body.
func postJSON(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDaemonObservations: the running daemon takes calls' outcomes over
// POST /api/v1/observations (contract §11): a call's timeout has the
// trunk probed at once, not a minute later; a 503 with Retry-After
// drains it, logged and counted; an unknown destination is dropped and
// counted.
func TestDaemonObservations(t *testing.T) {
	r, err := responder.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	uri := "sip:pbx07@" + r.Addr().String()
	dir := t.TempDir()
	conf, tokenFile := filepath.Join(dir, "q.conf"), filepath.Join(dir, "token")
	// The first probe within a second, not anywhere in F's minute.
	writeFile(t, conf, fmt.Sprintf("[global]\ntype=global\nmax_initial_qualify_time=1\n\n[pbx07]\ntype=aor\ncontact=%s\nqualify_frequency=60\nqualify_timeout=1\nqualify_retry_interval=1\n", uri))
	writeFile(t, tokenFile, "s3cret\n")
	d := startDaemon(t, "--config", conf, "--http", "127.0.0.1:0", "--token-file", tokenFile, "--sip-bind", "127.0.0.1:0")
	base := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.expect("qualifyd: started"))[1]
	d.expect("is now Reachable")
	first, _, _ := r.Counts()

	dest := r.Addr().String()
	code, body := postJSON(t, base+"/api/v1/observations", "s3cret",
		`{"source":"kamailio","observations":[{"destination":"`+dest+`","outcome":"timeout"},{"destination":"192.0.2.99","outcome":"answered"}]}`)
	if code != 200 || !strings.Contains(body, `{"accepted":1,"dropped":{"unknown":1}}`) {
		t.Fatalf("observations: %d %s", code, body)
	}
	// The probe the timeout brought forward: the next one was a minute away.
	eventually(t, peerBound, "a probe after the call's timeout", func() bool {
		n, _, _ := r.Counts()
		return n != first
	})

	code, body = postJSON(t, base+"/api/v1/observations", "s3cret",
		`{"observations":[{"destination":"`+dest+`","outcome":"failed","code":503,"retry_after":20}]}`)
	if code != 200 || !strings.Contains(body, `"accepted":1`) {
		t.Fatalf("drain: %d %s", code, body)
	}
	d.expect("is draining (503 with Retry-After): out of routing for 20s")
	_, metrics := get(t, "GET", base+"/metrics", "")
	for _, want := range []string{"qualifyd_contacts_draining 1", "qualifyd_contacts_routable 0",
		`qualifyd_observations_total{outcome="timeout",source="kamailio"} 1`, `qualifyd_observations_total{outcome="failed",source="api"} 1`,
		`qualifyd_observations_dropped_total{reason="unknown"} 1`, "qualifyd_probes_pulled_total 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code, _ := postJSON(t, base+"/api/v1/observations", "wrong", `{"observations":[]}`); code != 401 {
		t.Errorf("a wrong token: %d", code)
	}
}
