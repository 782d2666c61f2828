package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
)

func TestNewNeedsEngine(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("New without engine: %v", err)
	}
}

// TestGolden pins every read route's exact reply in the reference
// scenario at 9 s, and the manual qualify replies after it.
func TestGolden(t *testing.T) {
	tests := []struct {
		name, method, target string
	}{
		{"contacts.golden", "GET", "/api/v1/contacts"},
		{"contacts_filtered.golden", "GET", "/api/v1/contacts?aor=carrier&status=Unreachable"},
		{"contacts_none.golden", "GET", "/api/v1/contacts?aor=nosuch"},
		{"aors.golden", "GET", "/api/v1/aors"},
		{"aor.golden", "GET", "/api/v1/aors/backup"},
		{"healthz.golden", "GET", "/healthz"},
		{"page.golden", "GET", "/"},
		{"page_aor.golden", "GET", "/aors/carrier"},
		{"qualify.golden", "POST", "/api/v1/aors/pbx07/qualify"},
		{"qualify_carrier.golden", "POST", "/api/v1/aors/carrier/qualify"},
		{"qualify_off.golden", "POST", "/api/v1/aors/phone/qualify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := scenarioEnv(t, Config{Version: "test"})
				checkGolden(t, tt.name, response(t, v.do(tt.method, tt.target)))
			})
		})
	}
}

// TestManualQualifyApplies checks that a manual probe's result is applied
// and the schedule continues from it.
func TestManualQualifyApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		if w := v.do("POST", "/api/v1/aors/pbx07/qualify"); w.Code != http.StatusOK {
			t.Fatalf("qualify: %d %s", w.Code, w.Body)
		}
		var got struct {
			Contacts []struct {
				Last struct {
					At string `json:"at"`
				} `json:"last_result"`
				Next string `json:"next_probe_at"`
			} `json:"contacts"`
		}
		decode(t, v.do("GET", "/api/v1/contacts?aor=pbx07"), &got)
		if n := len(got.Contacts); n != 1 {
			t.Fatalf("%d contacts", n)
		}
		// Probed at 9 s, answered 12.5 ms later; next F = 30 s after the send.
		c := got.Contacts[0]
		if c.Last.At != "2000-01-01T00:00:09.012Z" || c.Next != "2000-01-01T00:00:39.000Z" {
			t.Fatalf("last result at %s, next probe at %s", c.Last.At, c.Next)
		}
	})
}

func TestQualifyTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{MaxQualifyWait: time.Second})
		w := v.do("POST", "/api/v1/aors/carrier/qualify")
		if w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), "deadline exceeded") {
			t.Fatalf("got %d %s, want 504", w.Code, w.Body)
		}
		if d := time.Since(v.t0) - 9*time.Second; d != time.Second {
			t.Fatalf("waited %v, want MaxQualifyWait", d)
		}
	})
}

func TestReload(t *testing.T) {
	tests := []struct {
		name   string
		target string
		reload func(context.Context, bool) error
		code   int
		body   string
	}{
		{"ok", "/api/v1/reload", noForce, 200, `{"ok":true}` + "\n"},
		{"force", "/api/v1/reload?force=1", func(_ context.Context, force bool) error {
			if !force {
				return errors.New("not forced")
			}
			return nil
		}, 200, `{"ok":true}` + "\n"},
		{"force=0", "/api/v1/reload?force=0", noForce, 200, `{"ok":true}` + "\n"},
		{"config error", "/api/v1/reload", func(context.Context, bool) error { return errors.New(`pjsip.conf:6: section "pbx07": bad`) },
			422, `{"error":"pjsip.conf:6: section \"pbx07\": bad"}` + "\n"},
		{"bad force", "/api/v1/reload?force=yes", noForce, 400, `{"error":"bad force \"yes\": want 1 or 0"}` + "\n"},
		{"force twice", "/api/v1/reload?force=1&force=1", noForce, 400, `{"error":"parameter force given more than once"}` + "\n"},
		{"unknown parameter", "/api/v1/reload?forc=1", noForce, 400, `{"error":"unknown parameter \"forc\": want force"}` + "\n"},
		{"no reload", "/api/v1/reload", nil, 501, `{"error":"reload is not available"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newEnv(t, Config{Reload: tt.reload}, engine.Config{})
				w := v.do("POST", tt.target)
				if w.Code != tt.code || w.Body.String() != tt.body || w.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("got %d %q %q, want %d %q", w.Code, w.Body, w.Header().Get("Content-Type"), tt.code, tt.body)
				}
			})
		})
	}
}

// noForce is a reload that must not be forced.
func noForce(_ context.Context, force bool) error {
	if force {
		return errors.New("forced")
	}
	return nil
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		method, target string
		header         []string
		code           int
		body, allow    string
	}{
		{"GET", "/api/v1/aors/nosuch", nil, 404, `{"error":"unknown AoR \"nosuch\""}`, ""},
		{"POST", "/api/v1/aors/nosuch/qualify", nil, 404, `{"error":"unknown AoR \"nosuch\""}`, ""},
		{"GET", "/nope", nil, 404, `{"error":"Not Found"}`, ""},
		{"GET", "/api/v1/contact", nil, 404, `{"error":"Not Found"}`, ""},
		{"DELETE", "/api/v1/contacts", nil, 405, `{"error":"Method Not Allowed"}`, "GET, HEAD"},
		{"GET", "/api/v1/reload", nil, 405, `{"error":"Method Not Allowed"}`, "POST"},
		{"GET", "/api/v1/aors/pbx07/qualify", nil, 405, `{"error":"Method Not Allowed"}`, "POST"},
		{"POST", "/api/v1/contacts", nil, 405, `{"error":"Method Not Allowed"}`, "GET, HEAD"},
		{"GET", "/api/v1/contacts?status=Up", nil, 400,
			`{"error":"bad status \"Up\": want NonQualified, Reachable or Unreachable"}`, ""},
		{"GET", "/api/v1/events", []string{"Last-Event-ID", "x1"}, 400,
			`{"error":"bad Last-Event-ID \"x1\": want a decimal event id"}`, ""},
		{"GET", "/api/v1/events?last_event_id=-1", nil, 400,
			`{"error":"bad Last-Event-ID \"-1\": want a decimal event id"}`, ""},
		{"GET", "/metrics", nil, 404, `{"error":"metrics are not enabled"}`, ""},
		{"GET", "/api/v1/contacts?limit=0", nil, 400,
			`{"error":"bad limit \"0\": want a number of contacts from 1 to 10000"}`, ""},
		{"GET", "/api/v1/aors?limit=10001", nil, 400,
			`{"error":"bad limit \"10001\": want a number of contacts from 1 to 10000"}`, ""},
		{"GET", "/api/v1/contacts?limit=ten", nil, 400,
			`{"error":"bad limit \"ten\": want a number of contacts from 1 to 10000"}`, ""},
		{"GET", "/api/v1/contacts?limit=", nil, 400,
			`{"error":"bad limit \"\": want a number of contacts from 1 to 10000"}`, ""},
		{"GET", "/api/v1/aors?limit=5&limit=6", nil, 400, `{"error":"parameter limit given more than once"}`, ""},
		{"GET", "/api/v1/contacts?stauts=Reachable", nil, 400,
			`{"error":"unknown parameter \"stauts\": want aor, status, after, limit"}`, ""},
		{"GET", "/api/v1/aors?aor=pbx07", nil, 400, `{"error":"unknown parameter \"aor\": want after, limit"}`, ""},
		{"GET", "/api/v1/contacts?after=a&after=b", nil, 400, `{"error":"parameter after given more than once"}`, ""},
		{"GET", "/api/v1/aors?after=%ff", nil, 400,
			`{"error":"bad after \"\\xff\": want an AoR name, as a listing's next gives it"}`, ""},
	}
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		for _, tt := range tests {
			w := v.do(tt.method, tt.target, tt.header...)
			if w.Code != tt.code || w.Body.String() != tt.body+"\n" || w.Header().Get("Allow") != tt.allow ||
				w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s %s: got %d %q Allow %q, want %d %q Allow %q", tt.method, tt.target,
					w.Code, w.Body, w.Header().Get("Allow"), tt.code, tt.body, tt.allow)
			}
		}
	})
}

func TestAuth(t *testing.T) {
	const token = "s3cret-token"
	tests := []struct {
		name, token, auth string
		code              int
	}{
		{"no token configured, no header", "", "", 200},
		{"no token configured, any header", "", "Bearer whatever", 200},
		{"missing header", token, "", 401},
		{"wrong token", token, "Bearer s3cret-tokem", 401},
		{"prefix of token", token, "Bearer s3cret", 401},
		{"wrong scheme", token, "Basic " + token, 401},
		{"no scheme", token, token, 401},
		{"right token", token, "Bearer " + token, 200},
		{"scheme is case-insensitive", token, "bearer " + token, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newEnv(t, Config{Token: tt.token, Reload: func(context.Context, bool) error { return nil }}, engine.Config{})
				var hdr []string
				if tt.auth != "" {
					hdr = []string{"Authorization", tt.auth}
				}
				for _, target := range []string{"/api/v1/reload", "/api/v1/aors/nosuch/qualify"} {
					w := v.do("POST", target, hdr...)
					checkAuth(t, w, tt.code)
				}
				if w := v.do("GET", "/api/v1/contacts"); w.Code != 200 {
					t.Fatalf("GET with token %q: %d", tt.token, w.Code)
				}
			})
		})
	}
}

// checkAuth checks a write reply: 401 with a challenge, or past the token
// check (200 for reload, 404 for the unknown AoR).
func checkAuth(t *testing.T, w *httptest.ResponseRecorder, want int) {
	t.Helper()
	challenge := w.Header().Get("WWW-Authenticate")
	if want == http.StatusUnauthorized {
		if w.Code != want || challenge != `Bearer realm="qualifyd"` || !strings.Contains(w.Body.String(), `"error"`) {
			t.Fatalf("got %d challenge %q body %q, want 401 with a Bearer challenge", w.Code, challenge, w.Body)
		}
		return
	}
	if w.Code == http.StatusUnauthorized || challenge != "" {
		t.Fatalf("got %d challenge %q, want past the token check", w.Code, challenge)
	}
}
