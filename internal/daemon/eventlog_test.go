package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestEventLogFormats(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := engine.Event{Seq: 7, Kind: engine.ProbeFailed, Time: at, AoR: "pbx07", URI: "sip:pbx07@192.0.2.7",
		From: qualify.Reachable, To: qualify.Reachable, Routable: true, Failures: 1, FailureThreshold: 3,
		SuccessThreshold: 1, Reason: qualify.ReasonTimeout, Next: at.Add(2 * time.Second)}
	line := "Contact pbx07/sip:pbx07@192.0.2.7 qualify failed (timeout): 1/3 failures, retrying in 2s"

	var text bytes.Buffer
	l, _ := NewLog(&text, "text", nil)
	l.event(ev)
	l.Close(time.Minute)
	want := "[" + at.Local().Format("2006-01-02 15:04:05.000") + "] " + line + "\n"
	if text.String() != want {
		t.Fatalf("text log %q, want %q", text.String(), want)
	}

	var js bytes.Buffer
	l, _ = NewLog(&js, "json", nil)
	l.event(ev)
	l.endpoint(endpoint.LogChange{Name: "pbx07"}, ev)
	l.Close(time.Minute)
	dec := json.NewDecoder(&js)
	var got map[string]any
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"msg": line, "event": "failure", "seq": 7.0, "aor": "pbx07", "to": "Reachable",
		"routable": true, "failures": 1.0, "failure_threshold": 3.0, "reason": "timeout", "next_probe_at": "2026-11-29T12:00:02Z"} {
		if got[k] != v {
			t.Errorf("json %s = %v, want %v", k, got[k], v)
		}
	}
	got = nil
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"msg": "Endpoint pbx07 is now Unreachable", "event": "endpoint", "endpoint": "pbx07",
		"from": "Reachable", "to": "Unreachable", "available": false, "seq": 7.0, "aor": "pbx07", "uri": "sip:pbx07@192.0.2.7"} {
		if got[k] != v {
			t.Errorf("endpoint json %s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := NewLog(&js, "xml", nil); err == nil {
		t.Fatal("unknown log format accepted")
	}
}

// stalledWriter is a reader that stops reading: each Write blocks until
// release is closed, then records what it was given.
type stalledWriter struct {
	release chan struct{}
	mu      sync.Mutex
	writes  []string
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestLogDropsWhenItsReaderStalls: with the writer blocked in a write
// (a pipe nobody reads), logging never waits: the lines that fit the
// buffer are kept, whole, and the rest are dropped and counted; Close
// gives up after its bound. Once the reader reads again, the kept lines
// go out in one write, followed by a line saying how many were dropped.
func TestLogDropsWhenItsReaderStalls(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &stalledWriter{release: make(chan struct{})}
				ev := engine.Event{Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
				l, _ := newLog(w, format, nil, 3*len(lineOf(t, format, ev)))
				l.endpoint(endpoint.LogChange{Name: "a0"}, ev)
				synctest.Wait() // the writer took the first line and is blocked writing it
				for i := 1; i <= 10; i++ {
					l.endpoint(endpoint.LogChange{Name: fmt.Sprintf("a%d", i%10)}, ev)
				}
				if got := l.Dropped(); got != 7 {
					t.Fatalf("dropped %d lines, want 7 (10 logged, 3 fit)", got)
				}
				start := time.Now()
				if l.Sync(time.Second) || time.Since(start) != time.Second {
					t.Fatalf("Sync returned after %v with the writer stalled, want false after its bound", time.Since(start))
				}
				close(w.release)
				synctest.Wait()
				if !l.Close(time.Second) {
					t.Fatal("Close: the released writer did not finish")
				}
				if len(w.writes) != 2 || strings.Count(w.writes[1], "\n") != 4 ||
					!strings.Contains(w.writes[1], "a1 ") || !strings.Contains(w.writes[1], "a3 ") ||
					!strings.HasSuffix(w.writes[1], "7 log lines were dropped: the log's reader fell behind (qualifyd_log_lines_dropped_total)"+
						map[string]string{"text": "\n", "json": "\"}\n"}[format]) {
					t.Fatalf("writes %q, want the first line, then the 3 kept and the drop notice in one write", w.writes)
				}
			})
		})
	}
}

// lineOf is the line of endpoint "a0" caused by ev in format, as a log
// with room writes it: every line of the test has its length.
func lineOf(t *testing.T, format string, ev engine.Event) string {
	t.Helper()
	var b bytes.Buffer
	l, _ := NewLog(&b, format, nil)
	l.endpoint(endpoint.LogChange{Name: "a0"}, ev)
	if !l.Close(time.Minute) {
		t.Fatal("Close: the line was not written")
	}
	return b.String()
}

// TestLogCloseAbandonsAStalledWriter: Close of a log whose reader never
// reads returns after its bound, and lines logged after it are dropped.
func TestLogCloseAbandonsAStalledWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &stalledWriter{release: make(chan struct{})}
		defer close(w.release) // lets the abandoned writer end with the bubble
		l, _ := NewLog(w, "text", nil)
		l.Notice(slog.LevelInfo, "stopped")
		start := time.Now()
		if l.Close(2*time.Second) || time.Since(start) != 2*time.Second {
			t.Fatalf("Close after %v, want false after its bound of 2s", time.Since(start))
		}
		l.Notice(slog.LevelInfo, "after")
		if l.Dropped() != 1 {
			t.Fatalf("dropped %d, want the line logged after Close", l.Dropped())
		}
	})
}

// TestDropNoticeGoesToStderrAtExit: when the daemon exits with its
// stdout stalled, the log's notice of the dropped lines cannot reach the
// log, so closeLogs writes it to Config.Errors (stderr), counting every
// line the log never reported. With a reader that keeps up, stderr stays
// quiet.
func TestDropNoticeGoesToStderrAtExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &stalledWriter{release: make(chan struct{})}
		defer close(w.release)
		ev := engine.Event{Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
		l, _ := newLog(w, "text", nil, 3*len(lineOf(t, "text", ev)))
		var stderr lockedBuffer
		d := &Daemon{log: l, errs: newLogWriter(&stderr, errorsBuffer)}
		l.endpoint(endpoint.LogChange{Name: "a0"}, ev)
		synctest.Wait() // the writer took the first line and is blocked writing it
		for i := 1; i <= 10; i++ {
			l.endpoint(endpoint.LogChange{Name: fmt.Sprintf("a%d", i)}, ev)
		}
		d.closeLogs()
		if got := stderr.String(); !strings.HasPrefix(got, "[") || strings.Count(got, "\n") != 1 ||
			!strings.HasSuffix(got, " qualifyd: 7 log lines were dropped: the log's reader fell behind (qualifyd_log_lines_dropped_total)\n") {
			t.Fatalf("stderr %q, want the notice of the 7 dropped lines", got)
		}
	})
	var stdout, stderr lockedBuffer
	l, _ := NewLog(&stdout, "text", nil)
	d := &Daemon{log: l, errs: newLogWriter(&stderr, errorsBuffer)}
	l.Notice(slog.LevelInfo, "stopped")
	d.closeLogs()
	if stderr.String() != "" || !strings.HasSuffix(stdout.String(), " qualifyd: stopped\n") {
		t.Fatalf("a reader that keeps up: stdout %q, stderr %q; want the line on stdout, stderr empty", stdout.String(), stderr.String())
	}
}
