package web

import (
	"net/http"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// Sinks is what the server needs from the daemon's sinks, *sink.Group.
type Sinks interface {
	Status() []sink.Status
	Objects(name string) (sink.Status, []sink.ObjectState, bool)
	Panic() sink.Panic
}

// sinks serves GET /api/v1/sinks: every sink in configuration order. No
// secret is part of a sink's state.
func (s *Server) sinks(w http.ResponseWriter, _ *http.Request) {
	out := api.SinkList{Sinks: []api.Sink{}}
	if s.cfg.Sinks != nil {
		p := newPanic(s.cfg.Sinks.Panic())
		out.Panic = &p
		for _, st := range s.cfg.Sinks.Status() {
			out.Sinks = append(out.Sinks, newSink(st))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// sinkDetail serves GET /api/v1/sinks/{name}[?pending=1]: the sink's
// state and its objects (only the pending ones with pending=1), or 404.
func (s *Server) sinkDetail(w http.ResponseWriter, r *http.Request) {
	onlyPending, err := parseBoolParam(r.URL.RawQuery, "pending")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := r.PathValue("name")
	var st sink.Status
	var objs []sink.ObjectState
	ok := false
	if s.cfg.Sinks != nil {
		st, objs, ok = s.cfg.Sinks.Objects(name)
	}
	if !ok {
		writeError(w, http.StatusNotFound, "unknown sink "+quote(name))
		return
	}
	out := api.SinkDetail{Sink: newSink(st), Items: make([]api.SinkObject, 0, len(objs))}
	for _, o := range objs {
		if !onlyPending || o.Pending() {
			out.Items = append(out.Items, api.SinkObject{Kind: o.Kind.String(), Name: o.Name, URI: o.URI,
				Wanted: o.Want.String(), Confirmed: o.Have.String(), Pending: o.Pending(), Held: o.Held})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func newPanic(p sink.Panic) api.Panic {
	return api.Panic{Active: p.Active, Since: api.At(p.Since), Waiting: p.Waiting, Destinations: p.Destinations, Failing: p.Failing, Down: p.Down, Recent: p.Recent,
		Threshold: p.Threshold, MinDestinations: p.MinDestinations, HoldThreshold: p.HoldThreshold, HoldSeconds: p.Hold.Seconds()}
}

func newSink(st sink.Status) api.Sink {
	out := api.Sink{Name: st.Name, Driver: st.Driver, Up: st.Up, Objects: st.Objects,
		Pending: st.Pending, Held: st.Held, Pushes: api.Pushes{OK: st.OK, Error: st.Error, Dropped: st.Dropped},
		LastSuccess: api.At(st.LastSuccess), LastError: st.LastError}
	if c := st.Calls; c != nil {
		out.Calls = &api.SinkCalls{Up: c.Up, Reconnects: c.Reconnects, LastError: c.LastError}
	}
	return out
}

// sources serves GET /api/v1/sources: every source, sorted by name.
func (s *Server) sources(w http.ResponseWriter, _ *http.Request) {
	out := api.SourceList{Sources: []api.Source{}}
	if s.cfg.Sources != nil {
		out.Sources = append(out.Sources, s.cfg.Sources()...)
	}
	writeJSON(w, http.StatusOK, out)
}
