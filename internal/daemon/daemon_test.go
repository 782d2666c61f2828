package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Contacts of the endpoint pbx07, one in each of its AoRs.
const (
	uriA = "sip:pbx07@192.0.2.7:5060"
	uriB = "sip:pbx07-b@192.0.2.8:5060"
)

// pbx07 is an endpoint with two qualified AoRs of one contact each, and a
// second endpoint "phone" on an AoR with qualify off.
func pbx07() *pjsip.Config {
	policy := &qualify.Policy{Frequency: 60 * time.Second, Timeout: 3 * time.Second}
	return &pjsip.Config{
		AoRs: []pjsip.AoR{
			{AoR: probe.AoR{Name: "pbx07", Contacts: []string{uriA}, Policy: policy}},
			{AoR: probe.AoR{Name: "pbx07-b", Contacts: []string{uriB}, Policy: policy}},
			{AoR: probe.AoR{Name: "phone", Contacts: []string{"sip:phone@192.0.2.9"}, Policy: new(qualify.DefaultPolicy())}},
		},
		Endpoints: []pjsip.Endpoint{{Name: "pbx07", AoRs: []string{"pbx07", "pbx07-b"}}, {Name: "phone", AoRs: []string{"phone"}}},
	}
}

// newTestDaemon builds a daemon on conf, logging to out in format, with
// stamps of the seconds since t0. It is never run: the tests feed it
// events.
func newTestDaemon(t *testing.T, conf *pjsip.Config, format string, out *bytes.Buffer, events int) *Daemon {
	t.Helper()
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0",
		Log: out, LogFormat: format, LogStamp: sinceT0, events: events})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.prober.Close(); d.closeLogs() })
	return d
}

// synced waits until d's log has written every line logged so far.
func synced(t *testing.T, d *Daemon) {
	t.Helper()
	if !d.log.Sync(time.Minute) {
		t.Fatal("the log did not write its lines")
	}
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func sinceT0(dst []byte, t time.Time) []byte { return append(dst, t.Sub(t0).String()...) }

// status is the StatusChanged event of a probe's verdict at second s.
func status(seq uint64, s int, aor, uri string, from, to qualify.Status) engine.Event {
	ev := engine.Event{Seq: seq, Kind: engine.StatusChanged, Time: t0.Add(time.Duration(s) * time.Second),
		AoR: aor, URI: uri, From: from, To: to, Routable: to != qualify.Unreachable, FailureThreshold: 1, SuccessThreshold: 1}
	if to == qualify.Reachable {
		ev.Result.RTT = time.Millisecond
	}
	return ev
}

// outage is the sequence of the contract's §10 example: both contacts
// become Reachable at start, A goes Unreachable while B is up, B goes
// Unreachable, A recovers.
var outage = []engine.Event{
	status(1, 1, "pbx07", uriA, qualify.NonQualified, qualify.Reachable),
	status(2, 2, "pbx07-b", uriB, qualify.NonQualified, qualify.Reachable),
	status(3, 63, "pbx07", uriA, qualify.Reachable, qualify.Unreachable),
	status(4, 64, "pbx07-b", uriB, qualify.Reachable, qualify.Unreachable),
	status(5, 123, "pbx07", uriA, qualify.Unreachable, qualify.Reachable),
}

// TestEndpointLinesInAsteriskOrder: the log's endpoint starts offline, so
// the first Reachable contact prints the endpoint line; a contact going
// Unreachable while another is up prints none; the last one going
// Unreachable prints the endpoint line, and a recovery too, each just
// before the contact line that caused it, as Asterisk
// (qualify-semantics §10). The endpoint on an AoR with qualify off is
// Reachable from the start.
func TestEndpointLinesInAsteriskOrder(t *testing.T) {
	var out bytes.Buffer
	d := newTestDaemon(t, pbx07(), "text", &out, 0)
	synced(t, d)
	start := out.String()
	if !strings.HasSuffix(start, "] Endpoint phone is now Reachable\n") || strings.Count(start, "\n") != 1 {
		t.Fatalf("start log %q, want the qualify-off endpoint's line alone", start)
	}
	out.Reset()
	for _, ev := range outage {
		d.handle(ev)
	}
	synced(t, d)
	want := `[1s] Endpoint pbx07 is now Reachable
[1s] Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Reachable.  RTT: 1.000 msec
[2s] Contact pbx07-b/sip:pbx07-b@192.0.2.8:5060 is now Reachable.  RTT: 1.000 msec
[1m3s] Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Unreachable.  RTT: 0.000 msec
[1m4s] Endpoint pbx07 is now Unreachable
[1m4s] Contact pbx07-b/sip:pbx07-b@192.0.2.8:5060 is now Unreachable.  RTT: 0.000 msec
[2m3s] Endpoint pbx07 is now Reachable
[2m3s] Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Reachable.  RTT: 1.000 msec
`
	if out.String() != want {
		t.Fatalf("log\n%s\nwant\n%s", out.String(), want)
	}
}

// TestEndpointLinesAfterRemoval: a contact removed by a reload prints its
// line first, then the endpoint's, as Asterisk deletes a contact before it
// updates the endpoint (sip_options_remove_contact_status).
func TestEndpointLinesAfterRemoval(t *testing.T) {
	var out bytes.Buffer
	d := newTestDaemon(t, pbx07(), "text", &out, 0)
	d.handle(outage[0])
	synced(t, d)
	out.Reset()
	d.handle(status(2, 5, "pbx07", uriA, qualify.Reachable, qualify.Removed))
	synced(t, d)
	want := "[5s] Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Removed.  RTT: 0.000 msec\n[5s] Endpoint pbx07 is now Unreachable\n"
	if out.String() != want {
		t.Fatalf("log\n%s\nwant\n%s", out.String(), want)
	}
}

// TestEndpointLinesJSON: the JSON log has the same records in the same
// order; an endpoint record names the contact event that caused it.
func TestEndpointLinesJSON(t *testing.T) {
	var out bytes.Buffer
	d := newTestDaemon(t, pbx07(), "json", &out, 0)
	synced(t, d)
	out.Reset()
	for _, ev := range outage {
		d.handle(ev)
	}
	synced(t, d)
	type record struct {
		Msg, Event, Endpoint, AoR, URI, To string
		Seq                                uint64
	}
	want := []record{
		{"Endpoint pbx07 is now Reachable", "endpoint", "pbx07", "pbx07", uriA, "Reachable", 1},
		{"Contact pbx07/" + uriA + " is now Reachable.  RTT: 1.000 msec", "status", "", "pbx07", uriA, "Reachable", 1},
		{"Contact pbx07-b/" + uriB + " is now Reachable.  RTT: 1.000 msec", "status", "", "pbx07-b", uriB, "Reachable", 2},
		{"Contact pbx07/" + uriA + " is now Unreachable.  RTT: 0.000 msec", "status", "", "pbx07", uriA, "Unreachable", 3},
		{"Endpoint pbx07 is now Unreachable", "endpoint", "pbx07", "pbx07-b", uriB, "Unreachable", 4},
		{"Contact pbx07-b/" + uriB + " is now Unreachable.  RTT: 0.000 msec", "status", "", "pbx07-b", uriB, "Unreachable", 4},
		{"Endpoint pbx07 is now Reachable", "endpoint", "pbx07", "pbx07", uriA, "Reachable", 5},
		{"Contact pbx07/" + uriA + " is now Reachable.  RTT: 1.000 msec", "status", "", "pbx07", uriA, "Reachable", 5},
	}
	dec := json.NewDecoder(&out)
	for i, w := range want {
		var got record
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got != w {
			t.Errorf("record %d\n%+v\nwant\n%+v", i, got, w)
		}
	}
	if dec.More() {
		t.Error("more records than expected")
	}
}

// TestEndpointsAreAvailableBeforeAnyVerdict: the routing view, which the
// API shows, is available while the log's view is still offline.
func TestEndpointsAreAvailableBeforeAnyVerdict(t *testing.T) {
	var out bytes.Buffer
	d := newTestDaemon(t, pbx07(), "text", &out, 0)
	synced(t, d)
	e, ok := d.Endpoints().Endpoint("pbx07")
	if !ok || !e.Available || strings.Contains(out.String(), "Endpoint pbx07") {
		t.Fatalf("pbx07 %+v (%v), log %q", e, ok, out.String())
	}
}

// TestLostEventsAreReported: when the log's subscription drops events,
// the daemon says how many in a warning, counts them in
// qualifyd_events_dropped_total, and re-reads the endpoints, one of whose
// AoR events was among those lost.
func TestLostEventsAreReported(t *testing.T) {
	var out bytes.Buffer
	conf := pbx07()
	var changes []endpoint.Change
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0",
		Log: &out, events: 1, EndpointChanged: func(c endpoint.Change) { changes = append(changes, c) }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.prober.Close()
	defer d.closeLogs()
	conf = &pjsip.Config{Endpoints: conf.Endpoints} // the reload removes every AoR
	if err := d.Reload(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	d.events.Close()
	d.follow(d.events)
	synced(t, d)
	if got := d.events.Dropped(); got != 5 {
		t.Fatalf("dropped %d events, want 5 (3 Removed and 3 availability events, buffer of 1)", got)
	}
	if !strings.Contains(out.String(), "5 events were not logged") {
		t.Errorf("log:\n%s", out.String())
	}
	if len(changes) != 2 || changes[0].Name != "pbx07" || changes[0].Available || changes[1].Name != "phone" {
		t.Errorf("availability changes %+v, want pbx07 and phone unavailable", changes)
	}
	if v := gatherValue(t, d.reg, "qualifyd_events_dropped_total"); v != 5 {
		t.Errorf("qualifyd_events_dropped_total = %v, want 5", v)
	}
}

// TestReloadShrink: a reload that would drop every AoR or more than half
// of the contacts is refused, and the running configuration stays, unless
// forced or allowed (qualify-semantics §8). The first load is no shrink.
func TestReloadShrink(t *testing.T) {
	two := pbx07()
	two.AoRs = two.AoRs[:2]
	one := pbx07()
	one.AoRs = one.AoRs[:1]
	empty := &pjsip.Config{}
	tests := []struct {
		name   string
		next   *pjsip.Config
		force  bool
		allow  bool
		want   string // the error, "" for none
		remain int    // contacts in the engine after the reload
	}{
		{"two of three contacts", two, false, false, "", 2},
		{"one of three contacts", one, false, false,
			"reload refused: the new configuration has 1 contacts and would drop more than half of the 3 running (allow it with --reload-allow-shrink, or once with POST /api/v1/reload?force=1)", 3},
		{"no AoR", empty, false, false,
			"reload refused: the new configuration has no AoR and would drop all 3 running (allow it with --reload-allow-shrink, or once with POST /api/v1/reload?force=1)", 3},
		{"no AoR, forced", empty, true, false, "", 0},
		{"no AoR, allowed", empty, false, true, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			conf := pbx07()
			d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0",
				Log: &out, LogStamp: sinceT0, ReloadAllowShrink: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			defer d.prober.Close()
			defer d.closeLogs()
			conf = tt.next
			err = d.Reload(t.Context(), tt.force)
			synced(t, d)
			if got := errText(err); got != tt.want {
				t.Fatalf("Reload: %q, want %q", got, tt.want)
			}
			if err != nil && (!errors.Is(err, ErrShrink) || !strings.Contains(out.String(), "reload failed, keeping the running configuration: "+tt.want)) {
				t.Errorf("error %v is not ErrShrink, or not logged:\n%s", err, out.String())
			}
			if n := len(d.Engine().Contacts()); n != tt.remain {
				t.Errorf("%d contacts in the engine, want %d", n, tt.remain)
			}
		})
	}
}

// TestFirstLoadIsNoShrink: a daemon may start on an empty configuration
// and reload it.
func TestFirstLoadIsNoShrink(t *testing.T) {
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return &pjsip.Config{}, nil }, SIPBind: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.prober.Close()
	defer d.closeLogs()
	if err := d.Reload(t.Context(), false); err != nil {
		t.Fatal(err)
	}
}

// TestWarningsLogged: the configuration's warnings are logged at start
// and at each reload.
func TestWarningsLogged(t *testing.T) {
	conf := pbx07()
	conf.Warnings = []*pjsip.Error{{File: "pjsip.conf", Line: 9, Section: "acl", Err: pjsip.ErrDuplicate}}
	var out bytes.Buffer
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", Log: &out, LogStamp: sinceT0})
	if err != nil {
		t.Fatal(err)
	}
	defer d.prober.Close()
	defer d.closeLogs()
	if err := d.Reload(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	synced(t, d)
	line := `] qualifyd: configuration warning: pjsip.conf:9: section "acl": duplicate section`
	if n := strings.Count(out.String(), line+"\n"); n != 2 {
		t.Errorf("%d warning lines, want 2:\n%s", n, out.String())
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

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

// TestVouchFailsWhenTheSchedulerIsStuck: a daemon whose engine does not
// run (as a stuck scheduler) lets its first probes fall overdue, and
// vouch then refuses the sinks' heartbeats with the reason; one whose
// probes are not late yet vouches.
func TestVouchFailsWhenTheSchedulerIsStuck(t *testing.T) {
	conf := pbx07()
	conf.MaxInitialQualifyTime = time.Millisecond
	// A fresh daemon vouches however slowly the machine got here: its
	// probes are overdue by less than an hour.
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", stalledAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer d.prober.Close()
	defer d.closeLogs()
	if err := d.vouch(); err != nil {
		t.Fatalf("a fresh daemon does not vouch: %v", err)
	}
	// The probes fall due within 1 ms, nothing runs them, and 100 ms
	// later they are overdue enough; the bound only stops a broken run.
	d.cfg.stalledAfter = 100 * time.Millisecond
	bound := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for d.vouch() == nil {
		if time.Now().After(bound) {
			t.Fatalf("probes %v overdue and vouch still succeeds", d.eng.Counters().Overdue)
		}
		<-tick.C
	}
	if err := d.vouch(); !strings.Contains(err.Error(), "overdue: qualifyd's scheduler is stalled and its verdicts are stale") {
		t.Fatalf("vouch: %v", err)
	}
}
