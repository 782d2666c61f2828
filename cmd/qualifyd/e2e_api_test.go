package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// get fetches url and returns the status code and body.
func get(t *testing.T, method, url, token string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// firstSSE reads the event stream at url from Last-Event-ID 0 until an
// event whose data contains want, and returns that event's lines.
func firstSSE(t *testing.T, url, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var ev []string
	for sc.Scan() {
		if sc.Text() != "" {
			ev = append(ev, sc.Text())
			continue
		}
		if joined := strings.Join(ev, "\n"); strings.Contains(joined, want) {
			return joined
		}
		ev = nil
	}
	t.Fatalf("stream ended without %q", want)
	return ""
}

func TestDaemonServesAPI(t *testing.T) {
	r, err := responder.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	uri := "sip:pbx07@" + r.Addr().String()
	dir := t.TempDir()
	conf, tokenFile := filepath.Join(dir, "q.conf"), filepath.Join(dir, "token")
	writeFile(t, conf, fmt.Sprintf("[pbx07]\ntype=aor\ncontact=%s\nqualify_frequency=1\nqualify_timeout=0.5\n"+
		"\n[pbx07]\ntype=endpoint\naors=pbx07,nosuch\n\n[lonely]\ntype=endpoint\n", uri))
	writeFile(t, tokenFile, "s3cret\n")
	before := engine.StartSeq(time.Now())
	d := startDaemon(t, "--config", conf, "--http", "127.0.0.1:0", "--token-file", tokenFile)
	started := d.expect("qualifyd: started")
	base := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(started)[1]
	d.expect("is now Reachable")

	if code, body := get(t, "GET", base+"/api/v1/contacts", ""); code != 200 ||
		!strings.Contains(body, `"uri":"`+uri+`","status":"Reachable","routable":true`) {
		t.Fatalf("contacts: %d %s", code, body)
	}
	if code, body := get(t, "GET", base+"/api/v1/endpoints", ""); code != 200 ||
		body != `{"endpoints":[{"name":"lonely","available":false,"aors":[]},{"name":"pbx07","available":true,"aors":["pbx07","nosuch"]}]}`+"\n" {
		t.Fatalf("endpoints: %d %s", code, body)
	}
	if code, body := get(t, "GET", base+"/api/v1/endpoints?limit=1", ""); code != 200 ||
		body != `{"endpoints":[{"name":"lonely","available":false,"aors":[]}],"next":"lonely"}`+"\n" {
		t.Fatalf("endpoints page: %d %s", code, body)
	}
	if code, body := get(t, "GET", base+"/api/v1/endpoints/pbx07", ""); code != 200 ||
		body != `{"name":"pbx07","available":true,"aors":["pbx07","nosuch"]}`+"\n" {
		t.Fatalf("endpoint: %d %s", code, body)
	}
	if code, body := get(t, "GET", base+"/api/v1/endpoints/nosuch", ""); code != 404 || body != `{"error":"unknown endpoint \"nosuch\""}`+"\n" {
		t.Fatalf("unknown endpoint: %d %s", code, body)
	}
	ev := firstSSE(t, base+"/api/v1/events", `"to":"Reachable"`)
	// The process's first id is past its start time in microseconds, past
	// any id an earlier process issued.
	id, _ := strconv.ParseUint(regexp.MustCompile(`(?m)^id: (\d+)$`).FindStringSubmatch(ev + "\nid: 0")[1], 10, 64)
	if !strings.Contains(ev, "event: status") || id <= before || id >= 1<<53 ||
		!strings.Contains(ev, `is now Reachable.  RTT: `) {
		t.Fatalf("replayed event:\n%s", ev)
	}
	if code, body := get(t, "GET", base+"/metrics", ""); code != 200 || !strings.Contains(body, `qualifyd_contacts{status="Reachable"} 1`) {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	if code, _ := get(t, "POST", base+"/api/v1/reload", ""); code != 401 {
		t.Fatalf("reload without token: %d", code)
	}
	if code, body := get(t, "POST", base+"/api/v1/reload", "s3cret"); code != 200 {
		t.Fatalf("reload with token: %d %s", code, body)
	}
	d.expect("qualifyd: configuration reloaded aors=1 contacts=1")
	out, err := exec.Command(binary, "show", "contacts", "--http", base).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Contact:  pbx07/`+regexp.QuoteMeta(uri)+` +[0-9a-f]{10} Avail +[0-9.]+  0/1`).Match(out) {
		t.Fatalf("show contacts: %v\n%s", err, out)
	}
}

func TestDaemonRefusesOpenAPIWithoutToken(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "q.conf")
	writeFile(t, conf, "[a]\ntype=aor\n")
	cmd := exec.Command(binary, "run", "--config", conf, "--http", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "token") {
		t.Fatalf("exit %v, output %s", err, out)
	}
}

// TestDaemonReloadShrink: a reload that would drop every AoR (here an
// emptied file) is refused, by SIGHUP and by the API, until the API
// forces it or the daemon runs with --reload-allow-shrink.
func TestDaemonReloadShrink(t *testing.T) {
	const refused = "reload refused: the new configuration has no AoR and would drop all 1 running"
	conf := filepath.Join(t.TempDir(), "q.conf")
	writeFile(t, conf, "[a]\ntype=aor\ncontact=sip:a@127.0.0.1:9\nqualify_frequency=60\n")
	d := startDaemon(t, "--config", conf, "--http", "127.0.0.1:0", "--sip-bind", "127.0.0.1:0")
	base := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.expect("qualifyd: started"))[1]
	writeFile(t, conf, "")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.expect("reload failed, keeping the running configuration: " + refused)
	if code, body := get(t, "POST", base+"/api/v1/reload", ""); code != 422 || !strings.Contains(body, refused) {
		t.Fatalf("reload: %d %s", code, body)
	}
	if code, body := get(t, "POST", base+"/api/v1/reload?force=1", ""); code != 200 {
		t.Fatalf("forced reload: %d %s", code, body)
	}
	d.expect("qualifyd: configuration reloaded aors=0 contacts=0")

	writeFile(t, conf, "[a]\ntype=aor\ncontact=sip:a@127.0.0.1:9\nqualify_frequency=60\n")
	allowed := startDaemon(t, "--config", conf, "--http", "", "--sip-bind", "127.0.0.1:0", "--reload-allow-shrink")
	allowed.expect("qualifyd: started")
	writeFile(t, conf, "")
	if err := allowed.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	allowed.expect("qualifyd: configuration reloaded aors=0 contacts=0")
}
