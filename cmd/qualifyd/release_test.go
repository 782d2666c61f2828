package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/state"
)

// TestReleaseCommand runs `qualifyd release` against a webhook receiver:
// every object of the named sink is pushed (removed), one line says so,
// and it exits 0; an unknown sink is a usage error before anything is
// sent; a router that does not answer exits 1 with the router's error.
func TestReleaseCommand(t *testing.T) {
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct{ Kind, AoR, Endpoint, To string }
		json.NewDecoder(r.Body).Decode(&c)
		mu.Lock()
		got = append(got, c.Kind+" "+c.AoR+c.Endpoint+" "+c.To)
		mu.Unlock()
	}))
	defer hook.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "qualifyd.conf")
	text := "[pbx07]\ntype=aor\ncontact=sip:pbx07@192.0.2.7\nqualify_frequency=30\n" +
		"[trunk]\ntype=endpoint\naors=pbx07\n" +
		"[hook]\ntype=sink\ndriver=webhook\nurl=" + hook.URL + "/q\n" +
		"[dead]\ntype=sink\ndriver=kamailio\nurl=http://127.0.0.1:1/RPC\ntimeout=1\n"
	writeFile(t, conf, text)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"release", "--config", conf, "hook"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.String() != "sink hook (webhook): released 3 of 3 objects\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	slices.Sort(got)
	if want := []string{"aor pbx07 removed", "contact pbx07 removed", "endpoint trunk removed"}; !slices.Equal(got, want) {
		t.Fatalf("receiver got %q, want %q", got, want)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"release", "--config", conf, "nope"}, &stdout, &stderr); code != 2 || len(got) != 3 {
		t.Fatalf("unknown sink: exit %d, %d pushes", code, len(got))
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"release", "--config", conf, "dead"}, &stdout, &stderr); code != 1 ||
		!strings.HasPrefix(stderr.String(), "qualifyd release: sink dead (kamailio): released 0 of 1 object: 1 of 1 objects not confirmed within 1s: ") ||
		!strings.Contains(stderr.String(), "connection refused") {
		t.Fatalf("dead router: exit %d, stderr %q", code, stderr.String())
	}
}

// TestReleaseSendsTheSavedDownsFirst: with --state-file, the objects
// down in the daemon's state file go first (the order itself is held by
// the sink package's TestReleaseSendsDownsFirst), and the line counts
// them; a
// state file that cannot be read is said on stderr and the release goes
// on, in any order, exit 0.
func TestReleaseSendsTheSavedDownsFirst(t *testing.T) {
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct{ Kind, AoR string }
		json.NewDecoder(r.Body).Decode(&c)
		mu.Lock()
		got = append(got, c.Kind+" "+c.AoR)
		mu.Unlock()
	}))
	defer hook.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, conf, "[dead]\ntype=aor\ncontact=sip:dead@192.0.2.7\nqualify_frequency=30\n"+
		"[live]\ntype=aor\ncontact=sip:live@192.0.2.8\nqualify_frequency=30\n"+
		"[hook]\ntype=sink\ndriver=webhook\nurl="+hook.URL+"/q\n")
	on, opts := &qualify.Policy{Frequency: 30 * time.Second}, &probe.Options{}
	saved := []engine.Saved{
		{AoR: "dead", URI: "sip:dead@192.0.2.7", Policy: on, Probe: opts, State: qualify.State{Status: qualify.Unreachable}, Last: engine.LastResult{At: time.Now()}},
		{AoR: "live", URI: "sip:live@192.0.2.8", Policy: on, Probe: opts, State: qualify.State{Status: qualify.Reachable}, Last: engine.LastResult{At: time.Now(), OK: true}},
	}
	path := filepath.Join(dir, "state")
	if _, err := state.Write(path, state.Header{Written: time.Now()}, slices.Values([][]engine.Saved{saved}), nil); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"release", "--config", conf, "--state-file", path}, &stdout, &stderr); code != 0 ||
		stdout.String() != "sink hook (webhook): released 4 of 4 objects, 2 down first\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if slices.Sort(got); !slices.Equal(got, []string{"aor dead", "aor live", "contact dead", "contact live"}) {
		t.Fatalf("receiver got %q, want every object once", got)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"release", "--config", conf, "--state-file", filepath.Join(dir, "none")}, &stdout, &stderr); code != 0 ||
		stdout.String() != "sink hook (webhook): released 4 of 4 objects\n" ||
		!strings.HasPrefix(stderr.String(), "qualifyd release: state file ignored: ") || !strings.HasSuffix(stderr.String(), ": sending in any order\n") {
		t.Fatalf("missing state file: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
