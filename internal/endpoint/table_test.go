package endpoint

import (
	"reflect"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// fakeAoRs is an engine's AoRs by name.
type fakeAoRs map[string]engine.AoRSnapshot

func (f fakeAoRs) AoR(name string) (engine.AoRSnapshot, bool) {
	a, ok := f[name]
	return a, ok
}

// aor is a configured AoR with n contacts of status st, qualified every
// frequency (0: qualify off).
func aor(name string, frequency time.Duration, st ...qualify.Status) engine.AoRSnapshot {
	a := engine.AoRSnapshot{Name: name, Policy: qualify.Policy{Frequency: frequency}}
	for _, s := range st {
		a.Contacts = append(a.Contacts, engine.ContactSnapshot{AoR: name, Status: s})
		a.Available = a.Available || s != qualify.Unreachable
	}
	return a
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// TestAvailability: an endpoint is available when any of its AoRs is
// (qualify-semantics §6), so before any verdict; an endpoint without an
// AoR, or whose AoRs are not configured, is not.
func TestAvailability(t *testing.T) {
	aors := fakeAoRs{
		"fresh": aor("fresh", 30*time.Second, qualify.NonQualified),
		"down":  aor("down", 30*time.Second, qualify.Unreachable),
		"empty": aor("empty", 30*time.Second),
	}
	tb := New(aors)
	tb.Configure([]pjsip.Endpoint{
		{Name: "a", AoRs: []string{"fresh"}}, {Name: "b", AoRs: []string{"down", "fresh"}},
		{Name: "c", AoRs: []string{"down"}}, {Name: "d"}, {Name: "e", AoRs: []string{"nosuch"}},
		{Name: "f", AoRs: []string{"empty"}},
	}, t0)
	want := []Snapshot{
		{Name: "a", Available: true, AoRs: []string{"fresh"}}, {Name: "b", Available: true, AoRs: []string{"down", "fresh"}},
		{Name: "c", AoRs: []string{"down"}}, {Name: "d"}, {Name: "e", AoRs: []string{"nosuch"}}, {Name: "f", AoRs: []string{"empty"}},
	}
	if got := tb.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("endpoints\n%+v\nwant\n%+v", got, want)
	}
	if _, ok := tb.Endpoint("nosuch"); ok {
		t.Error("an unknown endpoint was found")
	}
}

// TestAvailabilityChanges: an AoR's change is re-read from the engine and
// reported for each endpoint listing it whose availability changed.
func TestAvailabilityChanges(t *testing.T) {
	aors := fakeAoRs{"x": aor("x", time.Second, qualify.Reachable), "y": aor("y", time.Second, qualify.Reachable)}
	tb := New(aors)
	tb.Configure([]pjsip.Endpoint{{Name: "both", AoRs: []string{"x", "y"}}, {Name: "onlyx", AoRs: []string{"x"}}}, t0)
	aors["x"] = aor("x", time.Second, qualify.Unreachable)
	got := tb.AoRChanged(engine.Event{Kind: engine.AvailabilityChanged, AoR: "x", Time: t0})
	if want := []Change{{Name: "onlyx", Time: t0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
	aors["y"] = aor("y", time.Second, qualify.Unreachable)
	got = tb.AoRChanged(engine.Event{Kind: engine.AvailabilityChanged, AoR: "y", Time: t0})
	if want := []Change{{Name: "both", Time: t0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
	aors["x"] = aor("x", time.Second, qualify.Reachable)
	changes, _ := tb.Configure([]pjsip.Endpoint{{Name: "both", AoRs: []string{"x", "y"}}, {Name: "new", AoRs: []string{"x"}}}, t0)
	if want := []Change{{Name: "both", Available: true, Time: t0}}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("reload changes %+v, want %+v (a new endpoint is no change)", changes, want)
	}
}

// TestLogView: the log's view starts offline, goes online with the first
// Reachable contact of any of its AoRs and offline with the last one; a
// failure of a contact that was never Reachable changes nothing
// (qualify-semantics §10).
func TestLogView(t *testing.T) {
	aors := fakeAoRs{"x": aor("x", time.Second, qualify.NonQualified, qualify.NonQualified), "y": aor("y", time.Second, qualify.NonQualified)}
	tb := New(aors)
	if _, lines := tb.Configure([]pjsip.Endpoint{{Name: "ep", AoRs: []string{"x", "y"}}}, t0); lines != nil {
		t.Fatalf("start lines %+v, want none: the endpoint starts offline", lines)
	}
	up, down := []LogChange{{Name: "ep", Reachable: true}}, []LogChange{{Name: "ep"}}
	for i, tc := range []struct {
		aor      string
		from, to qualify.Status
		want     []LogChange
	}{
		{"y", qualify.NonQualified, qualify.Unreachable, nil},
		{"x", qualify.NonQualified, qualify.Reachable, up},
		{"x", qualify.NonQualified, qualify.Reachable, nil},
		{"y", qualify.Unreachable, qualify.Reachable, nil},
		{"x", qualify.Reachable, qualify.Unreachable, nil},
		{"y", qualify.Reachable, qualify.Unreachable, nil},
		{"x", qualify.Reachable, qualify.Removed, down},
		{"x", qualify.Unreachable, qualify.Removed, nil},
		{"y", qualify.Unreachable, qualify.Reachable, up},
		{"y", qualify.Reachable, qualify.NonQualified, down},
	} {
		got := tb.ContactChanged(engine.Event{Kind: engine.StatusChanged, AoR: tc.aor, From: tc.from, To: tc.to})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("step %d: %s %v -> %v: lines %+v, want %+v", i, tc.aor, tc.from, tc.to, got, tc.want)
		}
	}
}

// TestLogViewLatencyOnly: a latency-only contact stays in service while
// Unreachable, so its endpoint stays online, as Asterisk's endpoint state
// with qualify_latency_only (qualify-semantics §10); whether it was counted
// so is remembered when the option changes, and a resync counts it.
func TestLogViewLatencyOnly(t *testing.T) {
	aors := fakeAoRs{"x": aor("x", time.Second, qualify.NonQualified)}
	tb := New(aors)
	tb.Configure([]pjsip.Endpoint{{Name: "ep", AoRs: []string{"x"}}}, t0)
	up, down := []LogChange{{Name: "ep", Reachable: true}}, []LogChange{{Name: "ep"}}
	for i, tc := range []struct {
		from, to qualify.Status
		latency  bool
		want     []LogChange
	}{
		{qualify.NonQualified, qualify.Unreachable, true, up},
		{qualify.Unreachable, qualify.Reachable, true, nil},
		{qualify.Reachable, qualify.Unreachable, true, nil},
		{qualify.Unreachable, qualify.NonQualified, false, down},
		{qualify.NonQualified, qualify.Reachable, false, up},
		{qualify.Reachable, qualify.Unreachable, false, down},
		{qualify.Unreachable, qualify.Reachable, true, up},
		{qualify.Reachable, qualify.Unreachable, true, nil},
		{qualify.Unreachable, qualify.Removed, true, down},
	} {
		got := tb.ContactChanged(engine.Event{Kind: engine.StatusChanged, AoR: "x", URI: "sip:x@192.0.2.1", From: tc.from, To: tc.to, LatencyOnly: tc.latency})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("step %d: %v -> %v (latency only %v): lines %+v, want %+v", i, tc.from, tc.to, tc.latency, got, tc.want)
		}
	}
	a := aor("x", time.Second, qualify.Unreachable)
	a.Contacts[0].LatencyOnly, a.Contacts[0].URI = true, "sip:x@192.0.2.1"
	aors["x"] = a
	if _, lines := tb.Resync(t0); !reflect.DeepEqual(lines, up) {
		t.Fatalf("resync lines %+v, want %+v", lines, up)
	}
	if got := tb.ContactChanged(engine.Event{Kind: engine.StatusChanged, AoR: "x", URI: "sip:x@192.0.2.1", From: qualify.Unreachable, To: qualify.NonQualified}); !reflect.DeepEqual(got, down) {
		t.Fatalf("reset after resync: lines %+v, want %+v", got, down)
	}
}

// TestLogViewQualifyOff: an AoR with qualify off and a contact puts its
// endpoints online at configuration, as Asterisk's unqualified AoRs; one
// without a contact does not.
func TestLogViewQualifyOff(t *testing.T) {
	aors := fakeAoRs{"phone": aor("phone", 0, qualify.NonQualified), "none": aor("none", 0)}
	tb := New(aors)
	_, lines := tb.Configure([]pjsip.Endpoint{{Name: "a", AoRs: []string{"phone"}}, {Name: "b", AoRs: []string{"none"}}}, t0)
	if want := []LogChange{{Name: "a", Reachable: true}}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines %+v, want %+v", lines, want)
	}
	if _, lines = tb.Configure([]pjsip.Endpoint{{Name: "a", AoRs: []string{"phone"}}}, t0); lines != nil {
		t.Fatalf("reload lines %+v, want none: the endpoint stays online", lines)
	}
}

// TestResync: after lost events the log view is recounted from the
// engine's contacts, and availability re-read.
func TestResync(t *testing.T) {
	aors := fakeAoRs{"x": aor("x", time.Second, qualify.NonQualified)}
	tb := New(aors)
	tb.Configure([]pjsip.Endpoint{{Name: "ep", AoRs: []string{"x"}}}, t0)
	aors["x"] = aor("x", time.Second, qualify.Reachable)
	changes, lines := tb.Resync(t0)
	if changes != nil || !reflect.DeepEqual(lines, []LogChange{{Name: "ep", Reachable: true}}) {
		t.Fatalf("resync %+v %+v", changes, lines)
	}
	aors["x"] = aor("x", time.Second, qualify.Unreachable)
	changes, lines = tb.Resync(t0)
	if !reflect.DeepEqual(changes, []Change{{Name: "ep", Time: t0}}) || !reflect.DeepEqual(lines, []LogChange{{Name: "ep"}}) {
		t.Fatalf("resync %+v %+v", changes, lines)
	}
}

// TestPage: pages are in name order, after the name given, with more
// while endpoints follow.
func TestPage(t *testing.T) {
	tb := New(fakeAoRs{})
	tb.Configure([]pjsip.Endpoint{{Name: "c"}, {Name: "a"}, {Name: "b"}, {Name: "d"}}, t0)
	names := func(p []Snapshot) (out []string) {
		for _, s := range p {
			out = append(out, s.Name)
		}
		return out
	}
	for _, tc := range []struct {
		after string
		limit int
		want  []string
		more  bool
	}{
		{"", 2, []string{"a", "b"}, true}, {"b", 2, []string{"c", "d"}, false},
		{"bb", 1, []string{"c"}, true}, {"d", 5, nil, false}, {"", 9, []string{"a", "b", "c", "d"}, false},
	} {
		page, more := tb.Page(nil, tc.after, tc.limit)
		if !reflect.DeepEqual(names(page), tc.want) || more != tc.more {
			t.Errorf("after %q limit %d: %v %v, want %v %v", tc.after, tc.limit, names(page), more, tc.want, tc.more)
		}
	}
}

// TestLogViewOfANewlyListedAoR: an endpoint added by a reload over an AoR
// already Reachable goes online at once, as Asterisk's new compositor;
// the count of an AoR no endpoint lists any more is forgotten.
func TestLogViewOfANewlyListedAoR(t *testing.T) {
	aors := fakeAoRs{"x": aor("x", time.Second, qualify.Reachable)}
	tb := New(aors)
	tb.Configure(nil, t0)
	if lines := tb.ContactChanged(engine.Event{AoR: "x", From: qualify.NonQualified, To: qualify.Reachable}); lines != nil {
		t.Fatalf("lines %+v without an endpoint", lines)
	}
	_, lines := tb.Configure([]pjsip.Endpoint{{Name: "ep", AoRs: []string{"x"}}}, t0)
	if want := []LogChange{{Name: "ep", Reachable: true}}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines %+v, want %+v", lines, want)
	}
	tb.Configure(nil, t0)
	if len(tb.reachable) != 0 {
		t.Fatalf("counts %v kept for AoRs no endpoint lists", tb.reachable)
	}
}
