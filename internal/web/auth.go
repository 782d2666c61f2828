package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorize requires "Authorization: Bearer TOKEN" when a token is
// configured, answering 401 with WWW-Authenticate otherwise (RFC 6750
// section 3). Without a token the route is open.
func (s *Server) authorize(h http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return h
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !validBearer(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="qualifyd"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// validBearer compares the header's token with the configured one in
// constant time. Both are hashed first so that neither the content nor the
// length of the token leaks through timing.
func validBearer(header string, want [sha256.Size]byte) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
