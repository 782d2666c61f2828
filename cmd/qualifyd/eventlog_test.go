package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

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
	l, _ := newEventLog(&text, "text")
	l.event(ev)
	want := "[" + at.Local().Format("2006-01-02 15:04:05.000") + "] " + line + "\n"
	if text.String() != want {
		t.Fatalf("text log %q, want %q", text.String(), want)
	}

	var js bytes.Buffer
	l, _ = newEventLog(&js, "json")
	l.event(ev)
	l.endpoint(at, "pbx07", false)
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
	if err := dec.Decode(&got); err != nil || got["msg"] != "Endpoint pbx07 is now Unreachable" || got["available"] != false {
		t.Fatalf("endpoint json %v (%v)", got, err)
	}
	if _, err := newEventLog(&js, "xml"); err == nil {
		t.Fatal("unknown log format accepted")
	}
}
