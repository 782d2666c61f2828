package web

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/sink"
)

type fakeSinks []sink.Status

func (f fakeSinks) Status() []sink.Status { return f }

// Panic is the fake's panic state: active when a sink is named "panic",
// waiting when one is named "waiting".
func (f fakeSinks) Panic() sink.Panic {
	p := sink.Panic{Destinations: 10, Threshold: 50, MinDestinations: 10, HoldThreshold: 10, Hold: 33 * time.Second}
	for _, s := range f {
		switch s.Name {
		case "panic":
			p.Active, p.Failing, p.Down, p.Since = true, 7, 4, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		case "waiting":
			p.Waiting, p.Failing, p.Down = true, 3, 2
		}
	}
	return p
}

// Objects returns the named sink's status with fakeObjects.
func (f fakeSinks) Objects(name string) (sink.Status, []sink.ObjectState, bool) {
	for _, s := range f {
		if s.Name == name {
			return s, fakeObjects, true
		}
	}
	return sink.Status{}, nil, false
}

var fakeObjects = []sink.ObjectState{
	{Key: sink.Key{Kind: sink.KindHost, Name: "127.0.0.1:5081"}, Want: sink.Down, Have: sink.Up},
	{Key: sink.Key{Kind: sink.KindHost, Name: "127.0.0.1:5082"}, Want: sink.Up, Have: sink.Up},
	{Key: sink.Key{Kind: sink.KindContact, Name: "pbx07", URI: "sip:pbx07@192.0.2.7"}, Want: sink.Unknown},
}

// TestSinkDetail: GET /api/v1/sinks/NAME is the sink's state and every
// object with its wanted and confirmed levels; an unknown sink is 404.
func TestSinkDetail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := fakeSinks{{Name: "edge", Driver: "kamailio", Stats: sink.Stats{Up: true, Objects: 3, Pending: 1}}}
		v := newEnv(t, Config{Sinks: st}, engine.Config{})
		want := `{"name":"edge","driver":"kamailio","up":true,"objects":3,"pending":1,"held":0,"pushes":{"ok":0,"error":0,"dropped":0},` +
			`"last_success":null,"last_error":"","items":[` +
			`{"kind":"host","name":"127.0.0.1:5081","wanted":"down","confirmed":"up","pending":true},` +
			`{"kind":"host","name":"127.0.0.1:5082","wanted":"up","confirmed":"up","pending":false},` +
			`{"kind":"contact","name":"pbx07","uri":"sip:pbx07@192.0.2.7","wanted":"unknown","confirmed":"unknown","pending":false}]}` + "\n"
		if w := v.do("GET", "/api/v1/sinks/edge"); w.Code != 200 || w.Body.String() != want {
			t.Errorf("%d %s\nwant %s", w.Code, w.Body.String(), want)
		}
		pending := `{"name":"edge","driver":"kamailio","up":true,"objects":3,"pending":1,"held":0,"pushes":{"ok":0,"error":0,"dropped":0},` +
			`"last_success":null,"last_error":"","items":[` +
			`{"kind":"host","name":"127.0.0.1:5081","wanted":"down","confirmed":"up","pending":true}]}` + "\n"
		if w := v.do("GET", "/api/v1/sinks/edge?pending=1"); w.Code != 200 || w.Body.String() != pending {
			t.Errorf("?pending=1: %d %s\nwant %s", w.Code, w.Body.String(), pending)
		}
		if w := v.do("GET", "/api/v1/sinks/edge?pending=yes"); w.Code != 400 || w.Body.String() != `{"error":"bad pending \"yes\": want 1 or 0"}`+"\n" {
			t.Errorf("?pending=yes: %d %s", w.Code, w.Body.String())
		}
		if w := v.do("GET", "/api/v1/sinks/nosuch"); w.Code != 404 || w.Body.String() != `{"error":"unknown sink \"nosuch\""}`+"\n" {
			t.Errorf("unknown sink: %d %s", w.Code, w.Body.String())
		}
		if w := newEnv(t, Config{}, engine.Config{}).do("GET", "/api/v1/sinks/edge"); w.Code != 404 {
			t.Errorf("no sinks: %d %s", w.Code, w.Body.String())
		}
	})
}

func TestSinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := fakeSinks{
			{Name: "edge", Driver: "kamailio", Stats: sink.Stats{Up: true, Objects: 2, OK: 12, Error: 1,
				LastSuccess: time.Date(2026, 11, 29, 12, 0, 1, 250e6, time.UTC), LastError: "dispatcher.set_state: State Update Failed"}},
			{Name: "asterisk", Driver: "ami", Stats: sink.Stats{Objects: 1, Pending: 1,
				LastError: "ami 127.0.0.1:5038: login: Login: Authentication failed"}},
		}
		for _, tc := range []struct {
			sinks Sinks
			body  string
		}{
			{st, `{"panic":{"active":false,"since":null,"waiting":false,"destinations":10,"failing":0,"down":0,"recent":0,"threshold":50,"min_destinations":10,"hold_threshold":10,"hold_seconds":33},` +
				`"sinks":[{"name":"edge","driver":"kamailio","up":true,"objects":2,"pending":0,"held":0,"pushes":{"ok":12,"error":1,"dropped":0},` +
				`"last_success":"2026-11-29T12:00:01.250Z","last_error":"dispatcher.set_state: State Update Failed"},` +
				`{"name":"asterisk","driver":"ami","up":false,"objects":1,"pending":1,"held":0,"pushes":{"ok":0,"error":0,"dropped":0},` +
				`"last_success":null,"last_error":"ami 127.0.0.1:5038: login: Login: Authentication failed"}]}`},
			{fakeSinks{{Name: "panic", Driver: "kamailio", Stats: sink.Stats{Up: true, Objects: 10, Held: 6}}},
				`{"panic":{"active":true,"since":"2026-11-29T12:00:00.000Z","waiting":false,"destinations":10,"failing":7,"down":4,"recent":0,"threshold":50,"min_destinations":10,"hold_threshold":10,"hold_seconds":33},` +
					`"sinks":[{"name":"panic","driver":"kamailio","up":true,"objects":10,"pending":0,"held":6,"pushes":{"ok":0,"error":0,"dropped":0},` +
					`"last_success":null,"last_error":""}]}`},
			{nil, `{"sinks":[]}`},
		} {
			v := newEnv(t, Config{Sinks: tc.sinks}, engine.Config{})
			w := v.do("GET", "/api/v1/sinks")
			if w.Code != 200 || w.Body.String() != tc.body+"\n" {
				t.Errorf("%d %s\nwant %s", w.Code, w.Body.String(), tc.body)
			}
		}
	})
}

// TestSinkTiles: the page's summary says of each sink whether routing
// follows qualifyd there, the router's last error in the tooltip.
func TestSinkTiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := fakeSinks{
			{Name: "edge", Driver: "kamailio", Stats: sink.Stats{Up: true, Objects: 2, LastSuccess: time.Now()}},
			{Name: "asterisk", Driver: "ami", Stats: sink.Stats{Objects: 1, Pending: 1, LastError: "ami 127.0.0.1:5038: login: Login: Authentication failed"}},
			{Name: "dispatch", Driver: "kamailio", Stats: sink.Stats{Up: true, Objects: 3, Pending: 2, LastSuccess: time.Now()}},
			{Name: "hook", Driver: "webhook"},
		}
		v := newEnv(t, Config{Sinks: st}, engine.Config{})
		body := v.do("GET", "/").Body.String()
		for _, want := range []string{
			`<a class="tile" href="/api/v1/sinks/edge" title="kamailio sink"><b>✓ in step</b> sink edge</a>`,
			`<a class="tile bad" href="/api/v1/sinks/asterisk" title="ami sink; last error: ami 127.0.0.1:5038: login: Login: Authentication failed"><b>✕ down</b> sink asterisk</a>`,
			`<a class="tile bad" href="/api/v1/sinks/dispatch" title="kamailio sink"><b>2 pending</b> sink dispatch</a>`,
			`<a class="tile" href="/api/v1/sinks/hook" title="webhook sink"><b>– no request yet</b> sink hook</a>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		if body := newEnv(t, Config{}, engine.Config{}).do("GET", "/").Body.String(); strings.Contains(body, "sink ") {
			t.Error("a page without sinks shows a sink tile")
		}
		if strings.Contains(body, "panic") {
			t.Error("a page without a panic shows one")
		}
		waiting := append(slices.Clone(st), sink.Status{Name: "waiting", Driver: "kamailio"})
		body = newEnv(t, Config{Sinks: waiting}, engine.Config{}).do("GET", "/").Body.String()
		if want := `<a class="tile" href="/api/v1/sinks" title="more than 10% of the destinations are failing, short of a panic: a new down waits up to 33s in case one is coming (panic_hold_threshold)"><b>⏳ waiting</b> 3 of 10 destinations failing: downs wait</a>`; !strings.Contains(body, want) {
			t.Errorf("page with downs waiting lacks %s", want)
		}
		st = append(st, sink.Status{Name: "panic", Driver: "kamailio"})
		body = newEnv(t, Config{Sinks: st}, engine.Config{}).do("GET", "/").Body.String()
		if want := `<a class="tile bad" href="/api/v1/sinks" title="more than 50% of the destinations are failing, more likely qualifyd's own fault: the sinks push only ups, what was down stays down (panic_threshold)"><b>⚠ panic</b> 7 of 10 destinations failing: only ups</a>`; !strings.Contains(body, want) {
			t.Errorf("page in panic lacks %s", want)
		}
	})
}
