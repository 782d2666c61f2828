package web

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
)

// TestHistoryGolden pins GET /api/v1/aors/{name}/history in the reference
// scenario at 9 s with buckets of 2 s: the carrier's contacts fail (one
// silent, one 503 under qualify_2xx_only) and its availability ends; the
// other AoRs keep theirs.
func TestHistoryGolden(t *testing.T) {
	for _, name := range []string{"carrier", "pbx07"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := scenarioEnvOf(t, Config{}, engine.Config{HistoryBucket: 2 * time.Second})
				checkGolden(t, "history_"+name+".golden", response(t, v.do("GET", "/api/v1/aors/"+name+"/history")))
			})
		})
	}
}

// TestHistoryNotFound: an unknown AoR and one beyond HistoryAoRs have no
// history.
func TestHistoryNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnvOf(t, Config{}, engine.Config{HistoryAoRs: 1})
		for target, want := range map[string]string{
			"/api/v1/aors/nosuch/history":  `{"error":"unknown AoR \"nosuch\""}`,
			"/api/v1/aors/carrier/history": `{"error":"no history kept of AoR \"carrier\" (see --history-aors)"}`,
		} {
			w := v.do("GET", target)
			if w.Code != http.StatusNotFound || w.Body.String() != want+"\n" {
				t.Errorf("GET %s: %d %s, want 404 %s", target, w.Code, w.Body, want)
			}
		}
		if w := v.do("GET", "/api/v1/aors/pbx07/history"); w.Code != http.StatusOK {
			t.Errorf("GET the first AoR's history: %d %s", w.Code, w.Body)
		}
	})
}
