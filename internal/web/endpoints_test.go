package web

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// engineAoRs reads the AoRs of the env's engine, set once it exists.
type engineAoRs struct{ e *engine.Engine }

func (a *engineAoRs) AoR(name string) (engine.AoRSnapshot, bool) { return a.e.AoR(name) }

// endpointsEnv is the reference scenario at 9 s with endpoints on its
// AoRs: pbx07 (healthy), carrier (every contact down), trunks (carrier
// and backup: backup is latency-only, so still routable), phone (qualify
// off, NonQualified) and lonely (no AoR).
func endpointsEnv(t *testing.T) *env {
	t.Helper()
	aors := &engineAoRs{}
	tbl := endpoint.New(aors)
	v := newEnv(t, Config{Endpoints: tbl}, engine.Config{})
	aors.e = v.e
	v.prober.set(gw2URI, reply{Silent: true})
	v.prober.set(gw3URI, reply{Code: 503})
	v.prober.set(bakURI, reply{Silent: true})
	if err := v.e.Apply(scenario()); err != nil {
		t.Fatal(err)
	}
	v.until(9 * time.Second)
	tbl.Configure([]pjsip.Endpoint{
		{Name: "carrier", AoRs: []string{"carrier"}}, {Name: "lonely"}, {Name: "phone", AoRs: []string{"phone"}},
		{Name: "pbx07", AoRs: []string{"pbx07"}}, {Name: "trunks", AoRs: []string{"carrier", "backup"}},
	}, v.t0)
	return v
}

func TestEndpointsGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := endpointsEnv(t)
		checkGolden(t, "endpoints.golden", response(t, v.do("GET", "/api/v1/endpoints")))
		checkGolden(t, "endpoint.golden", response(t, v.do("GET", "/api/v1/endpoints/trunks")))
	})
}

// TestEndpointsPages: the endpoint listing pages as the AoR listing does
// (after, limit, next) and answers errors in the same JSON.
func TestEndpointsPages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := endpointsEnv(t)
		for _, tc := range []struct {
			target string
			code   int
			body   string
		}{
			{"/api/v1/endpoints?limit=2", 200, `{"endpoints":[{"name":"carrier","available":false,"aors":["carrier"]},` +
				`{"name":"lonely","available":false,"aors":[]}],"next":"lonely"}`},
			{"/api/v1/endpoints?limit=2&after=lonely", 200, `{"endpoints":[{"name":"pbx07","available":true,"aors":["pbx07"]},` +
				`{"name":"phone","available":true,"aors":["phone"]}],"next":"phone"}`},
			{"/api/v1/endpoints?limit=2&after=phone", 200, `{"endpoints":[{"name":"trunks","available":true,"aors":["carrier","backup"]}]}`},
			{"/api/v1/endpoints?after=trunks", 200, `{"endpoints":[]}`},
			{"/api/v1/endpoints?limit=0", 400, `{"error":"bad limit \"0\": want a number of endpoints from 1 to 10000"}`},
			{"/api/v1/endpoints?status=Reachable", 400, `{"error":"unknown parameter \"status\": want after, limit"}`},
			{"/api/v1/endpoints?limit=1&limit=2", 400, `{"error":"parameter limit given more than once"}`},
			{"/api/v1/endpoints/nosuch", 404, `{"error":"unknown endpoint \"nosuch\""}`},
			{"/api/v1/endpoints/lonely", 200, `{"name":"lonely","available":false,"aors":[]}`},
		} {
			w := v.do("GET", tc.target)
			if w.Code != tc.code || w.Body.String() != tc.body+"\n" {
				t.Errorf("%s: %d %s, want %d %s", tc.target, w.Code, w.Body.String(), tc.code, tc.body)
			}
		}
	})
}

// TestNoEndpoints: a server without an endpoint table lists none.
func TestNoEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, Config{}, engine.Config{})
		if w := v.do("GET", "/api/v1/endpoints"); w.Code != http.StatusOK || w.Body.String() != `{"endpoints":[]}`+"\n" {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
		if w := v.do("GET", "/api/v1/endpoints/x"); w.Code != http.StatusNotFound {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
	})
}
