package daemon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
	want := "[" + at.Local().Format("2006-01-02 15:04:05.000") + "] " + line + "\n"
	if text.String() != want {
		t.Fatalf("text log %q, want %q", text.String(), want)
	}

	var js bytes.Buffer
	l, _ = NewLog(&js, "json", nil)
	l.event(ev)
	l.endpoint(endpoint.LogChange{Name: "pbx07"}, ev)
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

// countingWriter records each Write.
type countingWriter struct{ writes []string }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestEventLogHoldsABurst: lines are written one by one, except between
// hold and release, where a burst goes out in one write, in order.
func TestEventLogHoldsABurst(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var w countingWriter
		l, _ := NewLog(&w, format, nil)
		ev := engine.Event{Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
		l.endpoint(endpoint.LogChange{Name: "a", Reachable: true}, ev)
		l.hold()
		for _, name := range []string{"b", "c", "d"} {
			l.endpoint(endpoint.LogChange{Name: name}, ev)
		}
		if len(w.writes) != 1 {
			t.Fatalf("%s: %d writes while held, want only the line before", format, len(w.writes))
		}
		l.release()
		if len(w.writes) != 2 || strings.Count(w.writes[1], "\n") != 3 ||
			strings.Index(w.writes[1], "b ") > strings.Index(w.writes[1], "d ") {
			t.Fatalf("%s: writes %q, want the held burst in one write, in order", format, w.writes)
		}
	}
}
