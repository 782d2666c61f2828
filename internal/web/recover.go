package web

import (
	"net/http"
	"runtime/debug"
)

// recover answers a panicking handler with 500 (when nothing was written
// yet), logs the panic with its stack and counts it. http.ErrAbortHandler
// keeps its meaning: it is re-raised for net/http to abort the response.
func (s *Server) recover(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.panicked(r, v)
			if !tw.wrote {
				writeError(tw, http.StatusInternalServerError, "internal error")
			}
		}()
		h.ServeHTTP(tw, r)
	})
}

func (s *Server) panicked(r *http.Request, v any) {
	s.cfg.Logger.Error("http handler panic", "method", r.Method, "path", r.URL.Path,
		"panic", v, "stack", string(debug.Stack()))
	if s.cfg.Panicked != nil {
		s.cfg.Panicked()
	}
}

// trackingWriter records whether the response has started. Unwrap lets
// http.ResponseController reach the underlying writer (Flush, deadlines).
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the underlying ResponseWriter.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
