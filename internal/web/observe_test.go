package web

import (
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// post serves one POST of body to target; header is name, value pairs.
func (v *env) post(target, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", target, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	v.h.ServeHTTP(w, r)
	return w
}

// TestObservationsRoute: POST /api/v1/observations takes a batch with
// the token, applies it to the engine and says what it took and
// dropped; a body it cannot read is refused whole and counted.
func TestObservationsRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var refused observe.Tally
		cfg := Config{Token: "tok"}
		p := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second}
		v := newEnv(t, cfg, engine.Config{}, engine.AoR{Name: "carrier", Contacts: []string{"sip:gw@192.0.2.7"}, Policy: &p})
		v.srv.cfg.Observations = refusingSink{sinkFunc(v.e.Observe), &refused}
		auth := []string{"Authorization", "Bearer tok"}
		body := `{"source":"kamailio","observations":[{"destination":"192.0.2.7","outcome":"failed","code":503,"retry_after":20},
			{"destination":"192.0.2.8","outcome":"answered"},{"aor":"carrier","outcome":"bogus"}]}`
		if w := v.post("/api/v1/observations", body); w.Code != 401 {
			t.Fatalf("without the token: %d", w.Code)
		}
		w := v.post("/api/v1/observations", body, auth...)
		if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != `{"accepted":1,"dropped":{"malformed":1,"unknown":1}}` {
			t.Fatalf("got %d %s", w.Code, got)
		}
		if a, _ := v.e.AoR("carrier"); a.Contacts[0].Phase != qualify.Draining || a.Contacts[0].Routable {
			t.Errorf("the 503 with Retry-After did not drain the contact: %+v", a.Contacts[0])
		}
		for _, c := range []struct {
			body string
			code int
			drop observe.Drop
		}{
			{`{"observations":`, 400, observe.DropMalformed},
			{`{"observations":[` + strings.Repeat(" ", observe.MaxBody) + `]}`, 413, observe.DropOversized},
		} {
			refused = observe.Tally{}
			if w := v.post("/api/v1/observations", c.body, auth...); w.Code != c.code || !strings.Contains(w.Body.String(), `"error"`) {
				t.Errorf("got %d %s, want %d", w.Code, w.Body, c.code)
			}
			if refused.Dropped[c.drop] != 1 {
				t.Errorf("refused %+v, want one %v", refused, c.drop)
			}
		}
		if w := v.post("/api/v1/observations?x=1", `{"observations":[]}`, auth...); w.Code != 400 {
			t.Errorf("a parameter: %d, want 400", w.Code)
		}
		// The AoR's page counts the calls beside its probes.
		if w := v.post("/api/v1/observations", `{"observations":[{"aor":"carrier","outcome":"timeout"}]}`, auth...); w.Code != 200 {
			t.Fatalf("timeout: %d %s", w.Code, w.Body)
		}
		page := v.do("GET", "/aors/carrier").Body.String()
		if !strings.Contains(page, "calls <b>2</b> (1 failed)") || !strings.Contains(page, "(draining)</span>") ||
			!strings.Contains(page, "<b>1</b> draining</span>") {
			t.Errorf("the AoR's page does not count the calls:\n%s", page)
		}
		h := v.do("GET", "/api/v1/aors/carrier/history").Body.String()
		if !strings.Contains(h, `"calls":2,"call_failures":1`) {
			t.Errorf("history %s", h)
		}
	})
}

type sinkFunc func([]observe.Observation) observe.Tally

func (f sinkFunc) Observe(b []observe.Observation) observe.Tally { return f(b) }

// refusingSink is a sinkFunc that adds what the server refused to
// refused.
type refusingSink struct {
	sinkFunc
	refused *observe.Tally
}

func (s refusingSink) Refused(t observe.Tally) { s.refused.Add(t) }

// TestDrainEventData: the event stream's draining event says so, with
// its log line.
func TestDrainEventData(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	ev := engine.Event{Seq: 7, Kind: engine.DrainChanged, Time: t0, AoR: "pbx07", URI: "sip:pbx07@192.0.2.7",
		From: qualify.Reachable, To: qualify.Reachable, Draining: true, Next: t0.Add(20 * time.Second), Reason: qualify.ReasonDraining}
	got := string(encodeEvent(ev).data)
	for _, want := range []string{"event: draining\n", `"kind":"draining"`, `"draining":true`, `"reason":"draining"`,
		`"next_probe_at":"2026-12-07T06:00:20.000Z"`, `is draining (503 with Retry-After): out of routing for 20s`} {
		if !strings.Contains(got, want) {
			t.Errorf("frame lacks %q:\n%s", want, got)
		}
	}
}
