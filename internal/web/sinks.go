package web

import (
	"net/http"

	"github.com/qualifyd/qualifyd/internal/sink"
)

// Sinks is what the server needs from the daemon's sinks, *sink.Group.
type Sinks interface {
	Status() []sink.Status
}

// sinkJSON is one sink's state in GET /api/v1/sinks.
type sinkJSON struct {
	Name        string     `json:"name"`
	Driver      string     `json:"driver"`
	Up          bool       `json:"up"`
	Objects     int        `json:"objects"`
	Pending     int        `json:"pending"`
	Pushes      pushesJSON `json:"pushes"`
	LastSuccess stamp      `json:"last_success"`
	LastError   string     `json:"last_error"`
}

// pushesJSON counts a sink's pushes by result.
type pushesJSON struct {
	OK      uint64 `json:"ok"`
	Error   uint64 `json:"error"`
	Dropped uint64 `json:"dropped"`
}

// sinksJSON is GET /api/v1/sinks.
type sinksJSON struct {
	Sinks []sinkJSON `json:"sinks"`
}

// sinks serves GET /api/v1/sinks: every sink in configuration order. No
// secret is part of a sink's state.
func (s *Server) sinks(w http.ResponseWriter, _ *http.Request) {
	out := sinksJSON{Sinks: []sinkJSON{}}
	if s.cfg.Sinks != nil {
		for _, st := range s.cfg.Sinks.Status() {
			out.Sinks = append(out.Sinks, sinkJSON{Name: st.Name, Driver: st.Driver, Up: st.Up, Objects: st.Objects,
				Pending: st.Pending, Pushes: pushesJSON{OK: st.OK, Error: st.Error, Dropped: st.Dropped},
				LastSuccess: stamp(st.LastSuccess), LastError: st.LastError})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
