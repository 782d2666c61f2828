package web

import (
	"errors"
	"io"
	"net/http"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/observe"
)

// observations serves POST /api/v1/observations: a batch of calls'
// outcomes (docs/api.md, "Observations"), applied at once. A body that
// cannot be read whole is dropped (400 or 413) and counted; otherwise
// the reply says what was taken and dropped.
func (s *Server) observations(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Observations == nil {
		writeError(w, http.StatusNotImplemented, "observations are not available")
		return
	}
	data, err := io.ReadAll(r.Body)
	var batch []observe.Observation
	var refused observe.Tally
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		refused.Dropped[observe.DropOversized] = 1
		err = observe.ErrOversized
	case err != nil:
		refused.Dropped[observe.DropMalformed] = 1
		err = errors.New("observations body: read: " + err.Error())
	default:
		batch, refused, err = observe.ParseBatch(data)
	}
	if r, ok := s.cfg.Observations.(observe.Refuser); ok && refused.Drops() > 0 {
		r.Refused(refused)
	}
	if err != nil {
		writeError(w, bodyStatus(err), err.Error())
		return
	}
	t := s.cfg.Observations.Observe(batch)
	t.Add(refused)
	writeJSON(w, http.StatusOK, newObservationsReply(t))
}

// bodyStatus maps an error of ParseBatch to an HTTP status.
func bodyStatus(err error) int {
	if errors.Is(err, observe.ErrOversized) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// newObservationsReply is t as the reply spells it: the dropped reasons
// with a count only.
func newObservationsReply(t observe.Tally) api.ObservationsReply {
	r := api.ObservationsReply{Accepted: t.Accepted, Dropped: map[string]int{}}
	for d, n := range t.Dropped {
		if n > 0 {
			r.Dropped[observe.Drop(d).String()] = n
		}
	}
	return r
}
