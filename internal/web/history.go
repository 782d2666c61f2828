package web

import (
	"net/http"

	"github.com/qualifyd/qualifyd/internal/engine"
)

// bucketJSON is one bucket of an AoR's history.
type bucketJSON struct {
	Start           stamp   `json:"start"`
	Probes          int     `json:"probes"`
	Failures        int     `json:"failures"`
	RTTMinUsec      int64   `json:"rtt_min_usec"`
	RTTP50Usec      int64   `json:"rtt_p50_usec"`
	RTTMaxUsec      int64   `json:"rtt_max_usec"`
	RoutableSeconds float64 `json:"routable_seconds"`
}

// changeJSON is one status change of an AoR's history.
type changeJSON struct {
	Time   stamp  `json:"time"`
	URI    string `json:"uri"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// historyJSON is GET /api/v1/aors/{name}/history's reply.
type historyJSON struct {
	AoR          string       `json:"aor"`
	WidthSeconds float64      `json:"width_seconds"`
	Buckets      []bucketJSON `json:"buckets"`
	Changes      []changeJSON `json:"changes"`
}

func newHistoryJSON(h *engine.History) historyJSON {
	j := historyJSON{AoR: h.AoR, WidthSeconds: h.Width.Seconds(),
		Buckets: make([]bucketJSON, len(h.Buckets)), Changes: make([]changeJSON, len(h.Changes))}
	for i, b := range h.Buckets {
		j.Buckets[i] = bucketJSON{Start: stamp(b.Start), Probes: b.Probes, Failures: b.Failures,
			RTTMinUsec: b.RTTMin.Microseconds(), RTTP50Usec: b.RTTP50.Microseconds(), RTTMaxUsec: b.RTTMax.Microseconds(),
			RoutableSeconds: b.Routable.Seconds()}
	}
	for i, c := range h.Changes {
		j.Changes[i] = changeJSON{Time: stamp(c.Time), URI: c.URI, From: c.From.String(), To: c.To.String(),
			Reason: reasonText(c.Reason, c.Code), Detail: c.Detail}
	}
	return j
}

// history serves GET /api/v1/aors/{name}/history: 404 for an AoR unknown
// or without a history (see engine.Config.HistoryAoRs).
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	h, ok := s.cfg.Engine.History(name)
	switch {
	case ok:
		writeJSON(w, http.StatusOK, newHistoryJSON(&h))
	case s.known(name):
		writeError(w, http.StatusNotFound, "no history kept of AoR "+quote(name)+" (see --history-aors)")
	default:
		writeError(w, http.StatusNotFound, "unknown AoR "+quote(name))
	}
}

// known reports whether the AoR named name is configured.
func (s *Server) known(name string) bool {
	_, ok := s.cfg.Engine.AoR(name)
	return ok
}
