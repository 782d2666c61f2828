package web

import (
	"net/http"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/engine"
)

func newHistory(h *engine.History) api.History {
	j := api.History{AoR: h.AoR, WidthSeconds: h.Width.Seconds(),
		Buckets: make([]api.Bucket, len(h.Buckets)), Changes: make([]api.Change, len(h.Changes))}
	for i, b := range h.Buckets {
		j.Buckets[i] = api.Bucket{Start: api.At(b.Start), Probes: b.Probes, Failures: b.Failures, Calls: b.Calls, CallFailures: b.CallFailures,
			RTTMinUsec: b.RTTMin.Microseconds(), RTTP50Usec: b.RTTP50.Microseconds(), RTTMaxUsec: b.RTTMax.Microseconds(),
			RoutableSeconds: b.Routable.Seconds()}
	}
	for i, c := range h.Changes {
		j.Changes[i] = api.Change{Time: api.At(c.Time), URI: c.URI, From: c.From.String(), To: c.To.String(),
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
		writeJSON(w, http.StatusOK, newHistory(&h))
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
