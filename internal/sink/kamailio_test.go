package sink

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDispatcher answers dispatcher.list and dispatcher.set_state as
// Kamailio 5.6 does (the shapes of testdata/kamailio, captured from a
// real one).
type fakeDispatcher struct {
	mu    sync.Mutex
	list  dispatcherList
	calls []string
	set   chan string // each set_state's "state set uri"
	raw   string      // if set, the answer to everything
	// items is the htable "qualifyd": each key's value and expiry
	// (setxi's parameters); noTable refuses it, as a Kamailio whose
	// kamailio.cfg lacks the table.
	items   map[string][2]float64
	noTable bool
}

func newFakeDispatcher(t *testing.T) (*fakeDispatcher, *httptest.Server) {
	f := &fakeDispatcher{set: make(chan string, 16)}
	b, err := os.ReadFile("testdata/kamailio/dispatcher.list.json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Result dispatcherList }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	f.list = r.Result
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeDispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Method string
		Params json.RawMessage
		ID     any
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.raw != "" {
		w.Write([]byte(f.raw))
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad request", 400)
		return
	}
	f.calls = append(f.calls, req.Method)
	var params []any
	if req.Params != nil && json.Unmarshal(req.Params, &params) != nil {
		// As Kamailio: "params" absent, or an array or object.
		http.Error(w, "params field is not an array or object", 500)
		return
	}
	answer := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	switch req.Method {
	case "dispatcher.list":
		answer["result"] = map[string]any{"NRSETS": len(f.list.Records), "RECORDS": f.list.Records}
	case "dispatcher.set_state":
		if f.setState(params) {
			answer["result"] = "Ok. Dispatcher state updated."
		} else {
			answer["error"] = map[string]any{"code": 500, "message": "State Update Failed"}
		}
	case "htable.get", "htable.setxi":
		f.htable(req.Method, params, answer)
	case "htable.listTables":
		answer["result"] = []map[string]any{{"name": "other", "expire": 0}}
		if !f.noTable {
			answer["result"] = []map[string]any{{"name": "other", "expire": 0}, {"name": "qualifyd", "expire": 30}}
		}
	default:
		answer["error"] = map[string]any{"code": 500, "message": "Method Not Found"}
	}
	if answer["error"] != nil {
		w.WriteHeader(500) // as Kamailio: the error's code is the HTTP status
	}
	json.NewEncoder(w).Encode(answer)
}

// setState applies ["a"|"i", SETID, URI]. Called with mu held.
func (f *fakeDispatcher) setState(p []any) bool {
	state, _ := p[0].(string)
	set, _ := p[1].(float64)
	uri, _ := p[2].(string)
	for i := range f.list.Records {
		s := &f.list.Records[i].Set
		for j := range s.Targets {
			d := &s.Targets[j].Dest
			if s.ID == int(set) && d.URI == uri {
				d.Flags = strings.ToUpper(state) + d.Flags[1:]
				f.set <- state + " " + uri
				return true
			}
		}
	}
	return false
}

// htable answers htable.get and htable.setxi on the table "qualifyd" as
// Kamailio 5.6 does. Called with mu held.
func (f *fakeDispatcher) htable(method string, p []any, answer map[string]any) {
	key, _ := p[1].(string)
	_, ok := f.items[key]
	switch {
	case p[0] != "qualifyd" || f.noTable:
		answer["error"] = map[string]any{"code": 500, "message": "Failed to set the item"}
	case method == "htable.get" && !ok:
		answer["error"] = map[string]any{"code": 500, "message": "Key name doesn't exist in htable."}
	case method == "htable.get":
		answer["result"] = map[string]any{"item": map[string]any{"name": key, "value": f.items[key][0]}}
	default:
		if f.items == nil {
			f.items = map[string][2]float64{}
		}
		v, _ := p[2].(float64)
		exp, _ := p[3].(float64)
		f.items[key] = [2]float64{v, exp}
		answer["result"] = "Ok. Key set to new value."
	}
}

func (f *fakeDispatcher) flags(uri string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.list.Records {
		for _, t := range r.Set.Targets {
			if t.Dest.URI == uri {
				return t.Dest.Flags
			}
		}
	}
	return ""
}

func host(hp string) Key { return Key{Kind: KindHost, Name: hp} }

func TestDispatcherListSample(t *testing.T) {
	f, _ := newFakeDispatcher(t)
	got := f.list.byHost()
	want := map[string][]dest{
		"127.0.0.1:5080":  {{set: 1, uri: "sip:127.0.0.1:5080", state: 'A'}},
		"192.0.2.10:5060": {{set: 1, uri: "sip:192.0.2.10:5060", state: 'I'}},
	}
	if len(got) != len(want) || !slices.Equal(got["127.0.0.1:5080"], want["127.0.0.1:5080"]) ||
		!slices.Equal(got["192.0.2.10:5060"], want["192.0.2.10:5060"]) {
		t.Fatalf("destinations %v", got)
	}
}

func TestKamailioSetsMatchingDestinations(t *testing.T) {
	f, srv := newFakeDispatcher(t)
	k := &Kamailio{URL: srv.URL + "/RPC", Timeout: 5 * time.Second}
	// A short resync, so that the test need not wait 30 s for the repair;
	// nothing here depends on its length.
	r := newReconciler("edge", k, Intervals{Resync: 10 * time.Millisecond}, nil, half)
	r.Set(host("127.0.0.1:5080"), Down, 0)
	r.Set(host("192.0.2.10:5060"), Up, 0)
	r.Set(host("198.51.100.1:5060"), Down, 0) // in no set: nothing to do
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	got := []string{<-f.set, <-f.set}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a sip:192.0.2.10:5060", "i sip:127.0.0.1:5080"}) {
		t.Fatalf("set_state calls %v", got)
	}
	// A dispatcher.reload resets the states; the next resync repairs them.
	f.mu.Lock()
	f.list.Records[0].Set.Targets[0].Dest.Flags = "AX"
	f.mu.Unlock()
	if got := <-f.set; got != "i sip:127.0.0.1:5080" {
		t.Fatalf("after the reload: %s", got)
	}
	cancel()
	<-done
	if f.flags("sip:127.0.0.1:5080") != "IX" || f.flags("sip:192.0.2.10:5060") != "AX" {
		t.Fatalf("flags %s %s", f.flags("sip:127.0.0.1:5080"), f.flags("sip:192.0.2.10:5060"))
	}
}

func mustResync(t *testing.T, k *Kamailio) func(Key) (Level, bool) {
	t.Helper()
	level, err := k.resync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return level
}

func TestKamailioErrors(t *testing.T) {
	f, srv := newFakeDispatcher(t)
	k := &Kamailio{URL: srv.URL + "/RPC", Timeout: 5 * time.Second}
	mustResync(t, k)
	k.dests["192.0.2.10:5060"][0].uri = "sip:192.0.2.99:5060" // gone from the set
	err := k.push(t.Context(), Object{Key: host("192.0.2.10:5060"), Level: Down})
	var rej *Rejected
	if !errorsAs(err, &rej) || err.Error() != "dispatcher.set_state: State Update Failed" {
		t.Fatalf("push: %v", err)
	}
	for _, raw := range []string{"garbage", `{"jsonrpc":"2.0","id":1}`} { // a 200 that is no JSON-RPC
		f.mu.Lock()
		f.raw = raw
		f.mu.Unlock()
		_, err := k.resync(t.Context())
		if err == nil || !strings.Contains(err.Error(), "dispatcher.list: not a JSON-RPC 2.0 response: ") || errorsAs(err, &rej) {
			t.Fatalf("%q: %v", raw, err)
		}
	}
	srv.Close()
	if _, err := k.resync(t.Context()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("closed: %v", err)
	}
}

// beatingKamailio is a driver of a fake dispatcher whose heartbeat
// expires after failOpen, on a clock stopped at unix second
// 1,800,000,000.
func beatingKamailio(t *testing.T, failOpen time.Duration) (*fakeDispatcher, *Kamailio) {
	f, srv := newFakeDispatcher(t)
	now := time.Unix(1_800_000_000, 0)
	k := &Kamailio{URL: srv.URL + "/RPC", Timeout: 5 * time.Second,
		FailOpenAfter: failOpen, Now: func() time.Time { return now }}
	return f, k
}

// TestKamailioHeartbeat: the heartbeat sets qualifyd=>heartbeat to the
// time with an expiry of failopen_after in whole seconds; an item gone
// after the session set it (Kamailio failed open, or restarted) ends the
// session, while a missing item at a session's first heartbeat does not.
func TestKamailioHeartbeat(t *testing.T) {
	f, k := beatingKamailio(t, 29500*time.Millisecond)
	for i := range 2 { // the first creates the item, the second renews it
		if err := k.heartbeat(t.Context()); err != nil {
			t.Fatalf("heartbeat %d: %v", i+1, err)
		}
		if got := f.items["heartbeat"]; got != [2]float64{1_800_000_000, 30} {
			t.Fatalf("heartbeat %d: item %v, want value 1800000000 expiry 30", i+1, got)
		}
	}
	delete(f.items, "heartbeat") // expired in Kamailio
	err := k.heartbeat(t.Context())
	if err == nil || !strings.Contains(err.Error(), "the heartbeat had expired: Kamailio failed open (or restarted) and reset every destination; reading dispatcher.list again") {
		t.Fatalf("heartbeat after the item expired: %v", err)
	}
	if _, ok := f.items["heartbeat"]; !ok {
		t.Fatal("the heartbeat that found the item gone did not set it again")
	}
	delete(f.items, "heartbeat")
	if err := k.connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := k.heartbeat(t.Context()); err != nil {
		t.Fatalf("a new session's first heartbeat with no item: %v", err)
	}
	f.noTable = true
	err = k.heartbeat(t.Context())
	if err == nil || !strings.Contains(err.Error(), `htable.setxi: Failed to set the item: kamailio.cfg lacks the htable "qualifyd" of the fail-open lines in docs/routers.md`) {
		t.Fatalf("no htable: %v", err)
	}
}

// TestKamailioTruncatedReply: a reply cut short names the cause, both
// when its Content-Length says so and when, without one, the JSON ends
// inside a value; a connection closed before any reply says so too.
func TestKamailioTruncatedReply(t *testing.T) {
	body := `{"jsonrpc":"2.0","result":{"RECORDS":[`
	for _, c := range []struct {
		name  string
		serve func(w http.ResponseWriter)
		want  string
	}{
		{"content-length", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "12160643")
			w.Write([]byte(body))
		}, "dispatcher.list: reply truncated after 38 of 12160643 bytes: raise tcp_conn_wq_max (and tcp_wq_max) in kamailio.cfg"},
		{"no content-length", func(w http.ResponseWriter) {
			w.Write([]byte(body))
			w.(http.Flusher).Flush()
		}, "dispatcher.list: reply truncated after 38 bytes: raise tcp_conn_wq_max (and tcp_wq_max) in kamailio.cfg"},
		{"no reply", func(w http.ResponseWriter) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		}, "EOF: Kamailio closed the connection without a reply (a large reply needs more private memory: kamailio -M)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serve(w) }))
			defer srv.Close()
			k := &Kamailio{URL: srv.URL + "/RPC", Timeout: 5 * time.Second}
			_, err := k.resync(t.Context())
			if err == nil || !strings.HasSuffix(err.Error(), c.want) {
				t.Fatalf("got %v\nwant ...%s", err, c.want)
			}
		})
	}
}

// TestKamailioCheckHeartbeatTable: check-config --connect finds the
// heartbeat's htable in htable.listTables, and names the README's lines
// when it is missing.
func TestKamailioCheckHeartbeatTable(t *testing.T) {
	f, k := beatingKamailio(t, 30*time.Second)
	if err := checkHeartbeatTable(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	f.noTable = true
	err := checkHeartbeatTable(t.Context(), k)
	if err == nil || !strings.HasSuffix(err.Error(), `: no htable "qualifyd" with autoexpire: kamailio.cfg needs the fail-open lines of docs/routers.md, or Kamailio never fails open when qualifyd stops`) {
		t.Fatalf("no table: %v", err)
	}
}
