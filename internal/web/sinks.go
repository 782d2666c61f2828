package web

import (
	"net/http"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// Sinks is what the server needs from the daemon's sinks, *sink.Group.
type Sinks interface {
	Status() []sink.Status
}

// sinks serves GET /api/v1/sinks: every sink in configuration order. No
// secret is part of a sink's state.
func (s *Server) sinks(w http.ResponseWriter, _ *http.Request) {
	out := api.SinkList{Sinks: []api.Sink{}}
	if s.cfg.Sinks != nil {
		for _, st := range s.cfg.Sinks.Status() {
			out.Sinks = append(out.Sinks, api.Sink{Name: st.Name, Driver: st.Driver, Up: st.Up, Objects: st.Objects,
				Pending: st.Pending, Pushes: api.Pushes{OK: st.OK, Error: st.Error, Dropped: st.Dropped},
				LastSuccess: api.At(st.LastSuccess), LastError: st.LastError})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
