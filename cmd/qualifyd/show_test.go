package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// fakeAPI serves the canned AoRs of testdata/api_aors.json, the contacts
// derived from them, and a qualify answer; it records the requests.
func fakeAPI(t *testing.T) (*httptest.Server, *[]string) {
	raw, err := os.ReadFile("testdata/api_aors.json")
	if err != nil {
		t.Fatal(err)
	}
	var aors struct {
		AoRs []struct {
			Contacts []json.RawMessage `json:"contacts"`
		} `json:"aors"`
	}
	if err := json.Unmarshal(raw, &aors); err != nil {
		t.Fatal(err)
	}
	var contacts []json.RawMessage
	for _, a := range aors.AoRs {
		contacts = append(contacts, a.Contacts...)
	}
	cj, _ := json.Marshal(map[string]any{"contacts": contacts})
	var seen []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/aors", func(w http.ResponseWriter, r *http.Request) { w.Write(raw) })
	mux.HandleFunc("GET /api/v1/contacts", func(w http.ResponseWriter, r *http.Request) { w.Write(cj) })
	mux.HandleFunc("GET /api/v1/endpoints", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"endpoints":[{"name":"lonely","available":false,"aors":[]},` +
			`{"name":"pbx07","available":true,"aors":["pbx07","pbx07-b"]}]}`))
	})
	sinks, _ := json.Marshal(api.SinkList{Sinks: []api.Sink{
		{Name: "kamailio", Driver: "kamailio", Up: true, Objects: 2, Pushes: api.Pushes{OK: 14},
			LastSuccess: api.At(time.Date(1999, 12, 31, 23, 59, 48, 700e6, time.UTC))},
		{Name: "pbx-ami", Driver: "ami", Objects: 3, Pending: 1, Pushes: api.Pushes{OK: 5, Error: 2},
			LastSuccess: api.At(time.Date(1999, 12, 31, 22, 0, 1, 0, time.UTC)), LastError: "dial tcp 127.0.0.1:5038: connect: connection refused"},
		{Name: "hook", Driver: "webhook", Up: true, Pushes: api.Pushes{Dropped: 1}},
	}})
	mux.HandleFunc("GET /api/v1/sinks", func(w http.ResponseWriter, r *http.Request) { w.Write(sinks) })
	detail, _ := json.Marshal(api.SinkDetail{
		Sink: api.Sink{Name: "kamailio", Driver: "kamailio", Up: true, Objects: 3, Pending: 1, Pushes: api.Pushes{OK: 14},
			LastSuccess: api.At(time.Date(1999, 12, 31, 23, 59, 48, 700e6, time.UTC))},
		Items: []api.SinkObject{
			{Kind: "host", Name: "192.0.2.7:5060", Wanted: "down", Confirmed: "up", Pending: true},
			{Kind: "host", Name: "192.0.2.8:5060", Wanted: "up", Confirmed: "up"},
			{Kind: "host", Name: "192.0.2.9:5060", Wanted: "unknown", Confirmed: "unknown"},
		}})
	mux.HandleFunc("GET /api/v1/sinks/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != "kamailio" {
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"unknown sink \"x\""}`))
			return
		}
		w.Write(detail)
	})
	at := func(s int) api.Time { return api.At(time.Date(1999, 12, 31, 23, 0, s, 0, time.UTC)) }
	history, _ := json.Marshal(api.History{AoR: "pbx07", WidthSeconds: 60,
		Buckets: []api.Bucket{{Start: at(0), Probes: 30, Failures: 1}, {Start: at(60), Probes: 29, Failures: 3}},
		Changes: []api.Change{
			{Time: at(75), URI: "sip:pbx07@192.0.2.7:5060", From: "Reachable", To: "Unreachable", Reason: "timeout"},
			{Time: at(95), URI: "sip:pbx07@192.0.2.7:5060", From: "Unreachable", To: "Reachable"},
			{Time: at(99), URI: "sip:pbx07-b@192.0.2.8:5060", From: "Reachable", To: "Unreachable", Reason: "status 503", Detail: "Service Unavailable"},
		}})
	mux.HandleFunc("GET /api/v1/aors/{name}/history", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != "pbx07" {
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"unknown AoR \"x\""}`))
			return
		}
		w.Write(history)
	})
	mux.HandleFunc("POST /api/v1/aors/{name}/qualify", func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		if r.PathValue("name") != "pbx07" {
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"unknown AoR \"x\""}`))
			return
		}
		w.Write([]byte(`{"aor":"pbx07","results":[{"uri":"sip:pbx07@192.0.2.7:5060","ok":true,"status":"Reachable","code":200,"reason":"","rtt_usec":12500,"detail":""},` +
			`{"uri":"sip:pbx07-b@192.0.2.8:5060","ok":false,"status":"Reachable","code":0,"reason":"timeout","rtt_usec":0,"detail":""}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &seen
}

// goldenFile compares got with testdata/name, or rewrites it with -update
// (the flag is declared in simulate_test.go).
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestShowTables(t *testing.T) {
	srv, _ := fakeAPI(t)
	now := time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)
	c := &apiClient{base: srv.URL, http: srv.Client()}
	for _, what := range []string{"contacts", "aors", "endpoints", "sinks"} {
		var out bytes.Buffer
		if err := show(t.Context(), c, what, &out, now); err != nil {
			t.Fatal(err)
		}
		goldenFile(t, "show_"+what+".golden", out.Bytes())
	}
	var out bytes.Buffer
	if err := showStats(t.Context(), c, &out, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "show_contacts_stats.golden", out.Bytes())
	out.Reset()
	if err := showHistory(t.Context(), c, "pbx07", &out); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "show_history.golden", out.Bytes())
	out.Reset()
	if err := showSink(t.Context(), c, "kamailio", false, &out, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "show_sink.golden", out.Bytes())
}

// TestShowStatsFlag: --stats adds the statistics to show contacts, with
// Asterisk's columns as they are without it, and only to it.
func TestShowStatsFlag(t *testing.T) {
	srv, _ := fakeAPI(t)
	var plain, stats, errb bytes.Buffer
	if code := run(t.Context(), []string{"show", "contacts", "--http", srv.URL}, &plain, &errb); code != 0 {
		t.Fatalf("show contacts: exit %d, %s", code, errb.String())
	}
	if code := run(t.Context(), []string{"show", "contacts", "--stats", "--http", srv.URL}, &stats, &errb); code != 0 {
		t.Fatalf("show contacts --stats: exit %d, %s", code, errb.String())
	}
	pl, st := strings.Split(plain.String(), "\n"), strings.Split(stats.String(), "\n")
	if len(pl) != len(st) || !strings.Contains(st[1], "<SRTT(ms)>") {
		t.Fatalf("--stats table:\n%s\nwithout:\n%s", stats.String(), plain.String())
	}
	for i := range pl {
		if !strings.HasPrefix(st[i], strings.TrimRight(pl[i], " ")) {
			t.Errorf("line %d: %q does not start with %q", i, st[i], pl[i])
		}
	}
	if code := run(t.Context(), []string{"show", "aors", "--stats", "--http", srv.URL}, &stats, &errb); code != 2 {
		t.Fatalf("show aors --stats: exit %d, want 2", code)
	}
}

func TestQualifyCommand(t *testing.T) {
	srv, seen := fakeAPI(t)
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"qualify", "pbx07", "--http", srv.URL, "--token-file", token}, &out, &errb)
	want := "pbx07/sip:pbx07@192.0.2.7:5060: Reachable, status 200, RTT 12.500 msec\n" +
		"pbx07/sip:pbx07-b@192.0.2.8:5060: qualify failed (timeout), status now Reachable\n"
	if code != 1 || out.String() != want {
		t.Fatalf("exit %d, out:\n%s\nwant:\n%s", code, out.String(), want)
	}
	if len(*seen) != 1 || (*seen)[0] != "/api/v1/aors/pbx07/qualify Bearer s3cret" {
		t.Fatalf("requests %q", *seen)
	}
	errb.Reset()
	if code := run(t.Context(), []string{"qualify", "x", "--http", srv.URL}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `404 Not Found: unknown AoR "x"`) {
		t.Fatalf("unknown AoR: exit %d, stderr %q", code, errb.String())
	}
	if code := run(t.Context(), []string{"qualify"}, &out, &errb); code != 2 {
		t.Fatalf("no AoR: exit %d", code)
	}
	if code := run(t.Context(), []string{"show", "registrations"}, &out, &errb); code != 2 {
		t.Fatalf("show registrations: exit %d", code)
	}
}

// TestShowHistoryCommand: show history takes one AoR; an AoR without a
// history is the API's 404, exit 1.
func TestShowHistoryCommand(t *testing.T) {
	srv, _ := fakeAPI(t)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"show", "history", "pbx07", "--http", srv.URL}, &out, &errb); code != 0 || !strings.Contains(out.String(), "  History:  pbx07\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if code := run(t.Context(), []string{"show", "history", "x", "--http", srv.URL}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `404 Not Found: unknown AoR "x"`) {
		t.Fatalf("unknown AoR: exit %d, stderr %q", code, errb.String())
	}
	if code := run(t.Context(), []string{"show", "sinks", "x", "--http", srv.URL}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `404 Not Found: unknown sink "x"`) {
		t.Fatalf("unknown sink: exit %d, stderr %q", code, errb.String())
	}
	for _, args := range [][]string{{"show", "history"}, {"show", "history", "a", "b"}, {"show", "history", "a", "--stats"}, {"show", "aors", "x"},
		{"show", "sinks", "a", "b"}, {"show", "sinks", "--pending"}, {"show", "history", "a", "--pending"}} {
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestREADMEShowHistory: docs/api.md's show history example is the
// command's output (testdata/show_history.golden, which TestShowTables
// holds to the code).
func TestREADMEShowHistory(t *testing.T) {
	readmeExample(t, "qualifyd show history pbx07", "show_history.golden")
}

// readmeExample checks that docs/api.md shows command's output as the
// golden file testdata/name has it, in a code block of its own.
func readmeExample(t *testing.T, command, name string) {
	t.Helper()
	readme := docText(t, "docs/api.md")
	golden, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readme, "$ "+command+"\n"+strings.TrimRight(string(golden), "\n")+"\n```") {
		t.Errorf("docs/api.md's %s example is not testdata/%s:\n%s", command, name, golden)
	}
}

// TestShowSinksPanic: `show sinks` says when qualifyd panics, or when
// downs wait for a panic, and nothing otherwise.
func TestShowSinksPanic(t *testing.T) {
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	printPanic(&b, &api.Panic{Destinations: 10, Down: 2, Threshold: 50}, now)
	printPanic(&b, nil, now)
	if b.Len() != 0 {
		t.Fatalf("printed %q without a panic", b.String())
	}
	printPanic(&b, &api.Panic{Active: true, Since: api.At(now.Add(-12 * time.Second)), Destinations: 10, Failing: 7, Down: 4, Threshold: 50}, now)
	if want := "PANIC for 12s: 7 of 10 destinations are failing, 4 down (more than 50%): the sinks push only ups\n\n"; b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
	b.Reset()
	printPanic(&b, &api.Panic{Waiting: true, Destinations: 30, Failing: 12, Down: 7, Recent: 10, HoldThreshold: 10, HoldSeconds: 33}, now)
	if want := "WAITING: 10 of 30 destinations began failing within 33s (more than 10%; 12 failing, 7 down): a new down is held up to 33s in case a panic is coming\n\n"; b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
}

// TestShortStatus: a draining contact shows as Drain in the contacts
// table, Drain* when latency-only (still routable).
func TestShortStatus(t *testing.T) {
	for _, c := range []struct {
		c    api.Contact
		want string
	}{
		{api.Contact{Status: "Reachable", Phase: "healthy", Routable: true}, "Avail"},
		{api.Contact{Status: "Reachable", Phase: "draining"}, "Drain"},
		{api.Contact{Status: "Reachable", Phase: "draining", Routable: true}, "Drain*"},
		{api.Contact{Status: "Unreachable", Phase: "down", Routable: true}, "Unavail*"},
		{api.Contact{Status: "Unreachable", Phase: "down"}, "Unavail"},
	} {
		if got := shortStatus(c.c); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}
