package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
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
		l, _ := newEventLog(&w, format)
		at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		l.endpoint(at, "a", true)
		l.hold()
		for _, name := range []string{"b", "c", "d"} {
			l.endpoint(at, name, false)
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

// TestLostEventsAreReported: when the log's subscription drops events,
// the daemon says how many in a warning, counts them in
// qualifyd_events_dropped_total, and re-reads the endpoints, one of whose
// AoR events was among those lost.
func TestLostEventsAreReported(t *testing.T) {
	var out bytes.Buffer
	log, _ := newEventLog(&out, "text")
	d := &daemon{log: log, endpoints: newEndpointWatch()}
	p, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"}) // for the scrape only
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg, m, err := newMetrics(func() (*engine.Engine, *sipprobe.Prober) { return d.eng, p }, d.eventsDropped, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.metrics = m
	if d.eng, err = engine.New(engine.Config{Prober: stubProber{}}); err != nil {
		t.Fatal(err)
	}
	aors := []engine.AoR{{Name: "a", Contacts: []string{"sip:a@192.0.2.1"}, Policy: new(qualify.DefaultPolicy())},
		{Name: "b", Contacts: []string{"sip:b@192.0.2.2"}, Policy: new(qualify.DefaultPolicy())}}
	if err := d.eng.Apply(aors); err != nil {
		t.Fatal(err)
	}
	d.endpoints.configure([]pjsip.Endpoint{{Name: "trunk", AoRs: []string{"b"}}}, d.aorAvailable)
	sub := d.eng.Subscribe(1)
	d.events.Store(sub)
	if err := d.eng.Apply(nil); err != nil { // removes both: 2 Removed, 2 availability events
		t.Fatal(err)
	}
	sub.Close()
	d.logEvents(sub)
	if got := sub.Dropped(); got != 3 {
		t.Fatalf("dropped %d events, want 3 (buffer of 1)", got)
	}
	if !strings.Contains(out.String(), "3 events were not logged") || !strings.Contains(out.String(), "Endpoint trunk is now Unreachable") {
		t.Errorf("log:\n%s", out.String())
	}
	if v := gatherValue(t, reg, "qualifyd_events_dropped_total"); v != 3 {
		t.Errorf("qualifyd_events_dropped_total = %v, want 3", v)
	}
}

// stubProber answers nothing; the engine is never run in these tests.
type stubProber struct{}

func (stubProber) Start(context.Context, qualify.Target, uint64, func(uint64, qualify.Result)) {}

// gatherValue returns the value of the unlabelled counter name in reg.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}
