package web

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
)

// routes registers every route on s.mux. The paths and JSON shapes are a
// contract that qualifyd show/qualify and other tools rely on.
func (s *Server) routes() {
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /aors/{name}", s.aorPage)
	s.mux.HandleFunc("GET /page/{file}", s.pageAsset)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /metrics", s.metrics)
	s.mux.HandleFunc("GET /api/v1/contacts", s.contacts)
	s.mux.HandleFunc("GET /api/v1/aors", s.aors)
	s.mux.HandleFunc("GET /api/v1/aors/{name}", s.aor)
	s.mux.HandleFunc("GET /api/v1/aors/{name}/history", s.history)
	s.mux.HandleFunc("GET /api/v1/endpoints", s.endpoints)
	s.mux.HandleFunc("GET /api/v1/endpoints/{name}", s.endpoint)
	s.mux.HandleFunc("GET /api/v1/sinks", noParams(s.sinks))
	s.mux.HandleFunc("GET /api/v1/sinks/{name}", s.sinkDetail)
	s.mux.HandleFunc("GET /api/v1/sources", noParams(s.sources))
	s.mux.HandleFunc("GET /api/v1/cluster", noParams(s.cluster))
	s.mux.HandleFunc("GET /api/v1/events", s.events)
	s.mux.Handle("POST /api/v1/aors/{name}/qualify", s.authorize(http.HandlerFunc(s.qualify)))
	s.mux.Handle("POST /api/v1/reload", s.authorize(http.HandlerFunc(s.reload)))
	s.mux.Handle("POST /api/v1/observations", s.authorize(noParams(s.observations)))
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.OKReply{OK: true})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Gatherer == nil {
		writeError(w, http.StatusNotFound, "metrics are not enabled")
		return
	}
	promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// contacts serves GET /api/v1/contacts[?aor=NAME][&status=LABEL]
// [&after=NAME][&limit=N], page by page (see listing).
func (s *Server) contacts(w http.ResponseWriter, r *http.Request) {
	q, err := parseListing(r, contactParams, "contacts")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	l := startList(w, "contacts")
	var item api.Contact
	next := pages(q, s.contactPages(q.aor), func(c *engine.ContactSnapshot) string { return c.AoR },
		func(page []engine.ContactSnapshot) bool {
			for i := range page {
				if q.keep(&page[i]) {
					item = s.contactJSON(&page[i])
					l.add(&item)
				}
			}
			return l.ok()
		})
	l.end(next)
}

// contactPages returns the pager of every contact, or only aor's when aor
// is set: one page, empty unless aor is configured and named after after.
func (s *Server) contactPages(aor string) pager[engine.ContactSnapshot] {
	if aor == "" {
		return s.cfg.Engine.ContactsPage
	}
	return func(_ []engine.ContactSnapshot, after string, _ int) ([]engine.ContactSnapshot, bool) {
		a, ok := s.cfg.Engine.AoR(aor)
		if !ok || a.Name <= after {
			return nil, false
		}
		return a.Contacts, false
	}
}

// aors serves GET /api/v1/aors[?after=NAME][&limit=N], page by page (see
// listing).
func (s *Server) aors(w http.ResponseWriter, r *http.Request) {
	serveList(w, r, "aors", "contacts", s.cfg.Engine.AoRsPage, func(a *engine.AoRSnapshot) string { return a.Name }, s.aorJSON)
}

// endpoints serves GET /api/v1/endpoints[?after=NAME][&limit=N], page by
// page (see listing); limit counts endpoints.
func (s *Server) endpoints(w http.ResponseWriter, r *http.Request) {
	serveList(w, r, "endpoints", "endpoints", s.cfg.Endpoints.Page, func(e *endpoint.Snapshot) string { return e.Name }, newEndpoint)
}

// serveList answers a listing of the items of fetch under key, each
// encoded by conv, page by page (see listing); its limit counts what.
func serveList[T, J any](w http.ResponseWriter, r *http.Request, key, what string, fetch pager[T], name func(*T) string, conv func(*T) J) {
	q, err := parseListing(r, pageParams, what)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	l := startList(w, key)
	var item J
	next := pages(q, fetch, name, func(page []T) bool {
		for i := range page {
			item = conv(&page[i])
			l.add(&item)
		}
		return l.ok()
	})
	l.end(next)
}

// aor serves GET /api/v1/aors/{name}.
func (s *Server) aor(w http.ResponseWriter, r *http.Request) {
	serveOne(w, r, "AoR", s.cfg.Engine.AoR, s.aorJSON)
}

// endpoint serves GET /api/v1/endpoints/{name}.
func (s *Server) endpoint(w http.ResponseWriter, r *http.Request) {
	serveOne(w, r, "endpoint", s.cfg.Endpoints.Endpoint, newEndpoint)
}

// serveOne answers the item get finds by the path's name, encoded by conv,
// or 404 naming the kind of item unknown.
func serveOne[T, J any](w http.ResponseWriter, r *http.Request, kind string, get func(string) (T, bool), conv func(*T) J) {
	v, ok := get(r.PathValue("name"))
	if !ok {
		writeError(w, http.StatusNotFound, "unknown "+kind+" "+quote(r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, conv(&v))
}

// qualify serves POST /api/v1/aors/{name}/qualify: probe the AoR's
// contacts now, waiting at most its qualify timeout plus a second
// (bounded by MaxQualifyWait).
func (s *Server) qualify(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a, ok := s.cfg.Engine.AoR(name)
	if !ok {
		writeError(w, http.StatusNotFound, "unknown AoR "+quote(name))
		return
	}
	wait := min(a.Policy.ProbeTimeout()+time.Second, s.cfg.MaxQualifyWait)
	extendWrite(w, wait+5*time.Second)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	res, err := s.cfg.Engine.Qualify(ctx, name)
	if err != nil {
		writeError(w, qualifyStatus(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, newQualify(name, res))
}

// qualifyStatus maps a manual qualify error to an HTTP status.
func qualifyStatus(err error) int {
	switch {
	case errors.Is(err, engine.ErrUnknownAoR):
		return http.StatusNotFound // removed by a reload meanwhile
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusServiceUnavailable
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Reload == nil {
		writeError(w, http.StatusNotImplemented, "reload is not available")
		return
	}
	force, err := parseReload(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.cfg.Reload(r.Context(), force); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, api.OKReply{OK: true})
}

// parseReload reads the reload's query: nothing, or force once, 1 or 0
// (true or false); any other parameter is an error, so that a mistyped
// "forc=1" is not taken as a plain reload.
func parseReload(rawQuery string) (force bool, err error) {
	return parseBoolParam(rawQuery, "force")
}

// noParams serves h on a route that takes no parameter: any parameter
// is a 400, so that a misspelt option is an error rather than ignored.
func noParams(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := parseNoParams(r.URL.RawQuery); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r)
	}
}

// parseNoParams refuses any parameter in rawQuery.
func parseNoParams(rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return errors.New("bad query: " + err.Error())
	}
	if len(q) > 0 {
		return errors.New("unknown parameter " + quote(slices.Sorted(maps.Keys(q))[0]) + ": the route takes none")
	}
	return nil
}

// parseBoolParam reads a query of at most one parameter, name, given
// once as 1 or true, or 0 or false; absent is false.
func parseBoolParam(rawQuery, name string) (bool, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return false, errors.New("bad query: " + err.Error())
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if k != name {
			return false, errors.New("unknown parameter " + quote(k) + ": want " + name)
		}
		if len(q[k]) > 1 {
			return false, errors.New("parameter " + name + " given more than once")
		}
	}
	v, ok := q[name]
	if !ok {
		return false, nil
	}
	switch v[0] {
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, errors.New("bad " + name + " " + quote(v[0]) + ": want 1 or 0")
}
