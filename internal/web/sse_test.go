package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// streamRecorder is a ResponseWriter whose body can be read while the
// handler is still writing. block, if set, makes every Write wait on it.
type streamRecorder struct {
	mu      sync.Mutex
	header  http.Header
	code    int
	body    bytes.Buffer
	flushes int
	block   chan struct{}
}

func newStreamRecorder() *streamRecorder { return &streamRecorder{header: http.Header{}} }

func (s *streamRecorder) Header() http.Header { return s.header }

func (s *streamRecorder) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code = code
}

func (s *streamRecorder) Write(b []byte) (int, error) {
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.Write(b)
}

func (s *streamRecorder) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
}

func (s *streamRecorder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.String()
}

// openStream starts GET target in the background; stop ends the request
// and waits for the handler.
func (v *env) openStream(target string, header ...string) (rec *streamRecorder, stop func()) {
	return v.openStreamTo(newStreamRecorder(), target, header...)
}

func (v *env) openStreamTo(rec *streamRecorder, target string, header ...string) (*streamRecorder, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "GET", target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	done := make(chan struct{})
	go func() { defer close(done); v.h.ServeHTTP(rec, r) }()
	synctest.Wait()
	return rec, func() { cancel(); <-done }
}

// TestEventsReplayAll replays the scenario's events from Last-Event-ID 0:
// exact frames, Asterisk lines included.
func TestEventsReplayAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		rec, stop := v.openStream("/api/v1/events", "Last-Event-ID", "0")
		stop()
		if rec.code != 200 || rec.header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("got %d %q", rec.code, rec.header.Get("Content-Type"))
		}
		checkGolden(t, "events.golden", []byte(rec.String()))
	})
}

// eventIDs returns the ids and names of the frames in an SSE body, and
// "gap" entries for gap events.
func eventIDs(body string) []string {
	var out []string
	for _, f := range strings.Split(strings.TrimSpace(body), "\n\n") {
		var id, name string
		for _, l := range strings.Split(f, "\n") {
			if v, ok := strings.CutPrefix(l, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(l, "event: "); ok {
				name = v
			}
		}
		switch {
		case name == "gap":
			out = append(out, "gap")
		case id != "":
			out = append(out, id+":"+name)
		}
	}
	return out
}

func TestEventsReplay(t *testing.T) {
	// The scenario publishes 6 events by 9 s (see events.golden); a ring
	// of 4 keeps 3..6.
	kept := "3:status 4:availability 5:failure 6:status"
	tests := []struct {
		name   string
		header []string
		target string
		want   string
	}{
		{"from header", []string{"Last-Event-ID", "4"}, "/api/v1/events", "5:failure 6:status"},
		{"from query", nil, "/api/v1/events?last_event_id=4", "5:failure 6:status"},
		{"header wins over query", []string{"Last-Event-ID", "5"}, "/api/v1/events?last_event_id=1", "6:status"},
		{"up to date", []string{"Last-Event-ID", "6"}, "/api/v1/events", ""},
		{"oldest kept minus one", []string{"Last-Event-ID", "2"}, "/api/v1/events", kept},
		{"older than the ring", []string{"Last-Event-ID", "1"}, "/api/v1/events", "gap " + kept},
		{"zero", []string{"Last-Event-ID", "0"}, "/api/v1/events", "gap " + kept},
		{"from before a restart", []string{"Last-Event-ID", "99"}, "/api/v1/events", "gap " + kept},
		{"live only", nil, "/api/v1/events", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := scenarioEnv(t, Config{RingSize: 4})
				rec, stop := v.openStream(tt.target, tt.header...)
				stop()
				if got := strings.Join(eventIDs(rec.String()), " "); got != tt.want {
					t.Fatalf("got %q, want %q\n%s", got, tt.want, rec)
				}
			})
		})
	}
}

func TestGapEventData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{RingSize: 4})
		rec, stop := v.openStream("/api/v1/events", "Last-Event-ID", "1")
		stop()
		want := "event: gap\ndata: {\"last_event_id\":1,\"next_event_id\":3}\n\n"
		if !strings.HasPrefix(rec.String(), want) {
			t.Fatalf("stream starts %q, want %q", rec.String(), want)
		}
	})
}

// TestEventsLive checks that a live client gets the events published after
// it connected, each flushed, and nothing older.
func TestEventsLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		rec, stop := v.openStream("/api/v1/events")
		defer stop()
		if rec.String() != "" {
			t.Fatalf("live client got old events: %q", rec)
		}
		v.prober.set(pbx07URI, reply{Silent: true})
		v.until(34 * time.Second) // the 30 s probe times out at 33 s
		want := "7:failure"
		if got := strings.Join(eventIDs(rec.String()), " "); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		line := `"line":"Contact pbx07/sip:pbx07@192.0.2.7:5060 qualify failed (timeout): 1/3 failures, retrying in 2s"`
		if !strings.Contains(rec.String(), line) {
			t.Fatalf("no Asterisk line in %q", rec)
		}
		if rec.flushes < 2 { // headers, then the event
			t.Fatalf("%d flushes", rec.flushes)
		}
	})
}

func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, Config{Heartbeat: 15 * time.Second}, engine.Config{})
		rec, stop := v.openStream("/api/v1/events")
		defer stop()
		v.until(44 * time.Second)
		if got, want := rec.String(), ": heartbeat\n\n: heartbeat\n\n"; got != want {
			t.Fatalf("after 44 s: %q, want %q", got, want)
		}
	})
}

// TestSlowClientDoesNotBlock has one client whose writes never return:
// the pump and the other clients carry on.
func TestSlowClientDoesNotBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, Config{RingSize: 2}, engine.Config{})
		stuck := newStreamRecorder()
		stuck.block = make(chan struct{})
		_, stopStuck := v.openStreamTo(stuck, "/api/v1/events?last_event_id=0")
		defer func() { close(stuck.block); stopStuck() }()
		v.prober.set(gw2URI, reply{Silent: true})
		if err := v.e.Apply(flapping()); err != nil {
			t.Fatal(err)
		}
		v.until(30 * time.Second)
		rec, stop := v.openStream("/api/v1/events?last_event_id=0")
		stop()
		if got := eventIDs(rec.String()); len(got) != 3 || got[0] != "gap" {
			t.Fatalf("fresh client after the slow one: %q", got)
		}
	})
}

// flapping is one AoR whose contact fails every 2 s.
func flapping() []engine.AoR {
	return []engine.AoR{{Name: "flap", Contacts: []string{gw2URI}, Policy: &qualify.Policy{
		Frequency: 10 * time.Second, Timeout: time.Second, Failures: 100, RetryInterval: time.Second}}}
}

// TestRunEndsStreams checks that cancelling Run ends the streams, so that
// http.Server.Shutdown can complete.
func TestRunEndsStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := engine.New(engine.Config{Prober: &fakeProber{script: map[string]reply{}}})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{Engine: e})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { srv.Run(ctx); close(ran) }()
		synctest.Wait()
		rec := newStreamRecorder()
		done := make(chan struct{})
		go func() { srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/events", nil)); close(done) }()
		synctest.Wait()
		cancel()
		<-ran
		<-done
		if rec.code != 200 {
			t.Fatalf("code %d", rec.code)
		}
	})
}

func TestRing(t *testing.T) {
	if f, l := newRing(3, 41).bounds(); f != 42 || l != 41 {
		t.Fatalf("empty bounds %d %d, want the base's next and the base", f, l)
	}
	r := newRing(3, 0)
	for seq := uint64(1); seq <= 5; seq++ {
		r.push(frame{seq: seq, data: []byte(fmt.Sprint(seq))})
	}
	if f, l := r.bounds(); f != 3 || l != 5 {
		t.Fatalf("bounds %d %d, want 3 5", f, l)
	}
	tests := []struct {
		cursor uint64
		want   string
	}{{0, "345"}, {3, "45"}, {4, "5"}, {5, ""}, {9, ""}}
	for _, tt := range tests {
		fs, _, closed := r.since(tt.cursor)
		var got string
		for _, f := range fs {
			got += string(f.data)
		}
		if got != tt.want || closed {
			t.Errorf("since(%d) = %q closed=%v, want %q", tt.cursor, got, closed, tt.want)
		}
	}
	_, wake, _ := r.since(5)
	r.close()
	r.push(frame{seq: 6})
	if _, _, closed := r.since(5); !closed {
		t.Fatal("not closed")
	}
	select {
	case <-wake:
	default:
		t.Fatal("close did not wake the readers")
	}
	if _, l := r.bounds(); l != 5 {
		t.Fatalf("push after close kept seq %d", l)
	}
}

func TestEventsHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		w := v.do("HEAD", "/api/v1/events")
		if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" || w.Body.Len() != 0 {
			t.Fatalf("got %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	})
}

// TestEventsAcrossProcesses: a client resuming from the last id of a
// process (A) on the process that replaced it (B, started later,
// numbering from its start time) gets a gap, then B's events: no id of B
// is one A issued, however many events either published.
func TestEventsAcrossProcesses(t *testing.T) {
	var lastA uint64
	var startA time.Time
	synctest.Test(t, func(t *testing.T) {
		startA = time.Now()
		a := scenarioEnvOf(t, Config{}, engine.Config{Seq: engine.StartSeq(time.Now())})
		lastA = a.e.Seq()
	})
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(startA.Add(time.Minute).Sub(time.Now())) // B starts a minute after A
		b := scenarioEnvOf(t, Config{}, engine.Config{Seq: engine.StartSeq(time.Now())})
		rec, stop := b.openStream("/api/v1/events", "Last-Event-ID", strconv.FormatUint(lastA, 10))
		stop()
		ids := eventIDs(rec.String())
		if len(ids) != 7 || ids[0] != "gap" {
			t.Fatalf("resuming B from A's last id %d: %v", lastA, ids)
		}
		first, _ := strconv.ParseUint(strings.Split(ids[1], ":")[0], 10, 64)
		if first <= lastA || first >= 1<<53 {
			t.Fatalf("B's first id %d, A's last %d", first, lastA)
		}
	})
}

// TestEventsContinueSavedSeq: a process that continues the numbers of a
// cleanly stopped one (its state file's Seq) resumes a client that had
// every event of the old one without a gap, whether the client comes
// before the new process's first event or after; an older or a newer id
// gets a gap.
func TestEventsContinueSavedSeq(t *testing.T) {
	const saved = 1_764_417_600_000_007
	all := "1:status 2:status 3:status 4:availability 5:failure 6:status" // after saved
	tests := []struct {
		name  string
		early bool // the client connects before the first event
		last  uint64
		want  string
	}{
		{"after the first events", false, saved, all},
		{"before any event", true, saved, all},
		{"from an older id", false, saved - 1, "gap " + all},
		{"from a newer id", true, saved + 3, "gap " + all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newEnv(t, Config{}, engine.Config{Seq: saved})
				var rec *streamRecorder
				stop := func() {}
				open := func() { rec, stop = v.openStream("/api/v1/events", "Last-Event-ID", strconv.FormatUint(tt.last, 10)) }
				if tt.early {
					open()
				}
				v.playScenario()
				if !tt.early {
					open()
				}
				stop()
				if got, want := strings.Join(eventIDs(rec.String()), " "), idsAfter(saved, tt.want); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			})
		})
	}
}

// idsAfter rewrites the ids of want ("1:status", counted after base) as
// event ids.
func idsAfter(base uint64, want string) string {
	var out []string
	for _, w := range strings.Fields(want) {
		if id, kind, ok := strings.Cut(w, ":"); ok {
			n, _ := strconv.ParseUint(id, 10, 64)
			w = strconv.FormatUint(base+n, 10) + ":" + kind
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}

// TestEventStreamsCapped opens MaxStreams streams: the next is refused
// with 503, a JSON body saying why and a Retry-After, and counted; once a
// stream ends, its slot serves a new client.
func TestEventStreamsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := 0
		v := newEnv(t, Config{MaxStreams: 2, StreamRefused: func() { refused++ }}, engine.Config{})
		_, stop1 := v.openStream("/api/v1/events")
		_, stop2 := v.openStream("/api/v1/events")
		defer stop2()
		over, stop3 := v.openStream("/api/v1/events")
		stop3()
		want := `{"error":"too many event streams: 2 open, the most this server serves; retry later"}` + "\n"
		if over.code != http.StatusServiceUnavailable || over.String() != want || refused != 1 {
			t.Fatalf("third stream: %d %q, %d refused; want 503 %q, 1 refused", over.code, over.String(), refused, want)
		}
		if got := over.header.Get("Retry-After"); got == "" {
			t.Fatal("no Retry-After on the refusal")
		}
		stop1()
		again, stop4 := v.openStream("/api/v1/events")
		stop4()
		if again.code != http.StatusOK || refused != 1 {
			t.Fatalf("after one ended: %d, %d refused; want 200, 1 refused", again.code, refused)
		}
	})
}
