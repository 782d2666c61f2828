package web

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// streamPage is how many contacts a full listing takes from the engine
// per hold of its lock: at a million contacts, listing them all at once
// held the lock for a second, stopping every probe, and built 184 MB of
// snapshots (`go test -bench Contacts1M ./internal/engine`).
const streamPage = 1024

// maxLimit bounds the limit parameter.
const maxLimit = 10000

// listing is what a list route was asked for: its filters, and the page.
type listing struct {
	aor       string // only this AoR's contacts, when set
	status    qualify.Status
	hasStatus bool
	after     string // start after the AoR of this name ("": at the first)
	limit     int    // one page of at most this many contacts; 0: every page
}

// Each listing's parameters: a route refuses any other, so that a
// misspelt filter is an error rather than the whole list.
var (
	contactParams = []string{"aor", "status", "after", "limit"}
	pageParams    = []string{"after", "limit"}
)

// parseListing reads the parameters of a listing that takes params (a
// subset of aor, status, after and limit) and whose limit counts what.
func parseListing(r *http.Request, params []string, what string) (listing, error) {
	q := r.URL.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(params, k):
			return listing{}, errors.New("unknown parameter " + quote(k) + ": want " + strings.Join(params, ", "))
		case len(q[k]) > 1:
			return listing{}, errors.New("parameter " + k + " given more than once")
		}
	}
	l := listing{aor: q.Get("aor"), after: q.Get("after")}
	if v := q.Get("status"); v != "" {
		st, ok := qualify.ParseStatus(v)
		if !ok {
			return l, errors.New("bad status " + quote(v) + ": want NonQualified, Reachable or Unreachable")
		}
		l.status, l.hasStatus = st, true
	}
	if !utf8.ValidString(l.after) {
		return l, errors.New("bad after " + quote(l.after) + ": want an AoR name, as a listing's next gives it")
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxLimit {
			return l, errors.New("bad limit " + quote(v[0]) + ": want a number of " + what + " from 1 to " + itoa(maxLimit))
		}
		l.limit = n
	}
	return l, nil
}

// keep reports whether c passes the status filter.
func (l *listing) keep(c *engine.ContactSnapshot) bool {
	return !l.hasStatus || c.Status == l.status
}

// pager returns the page of items after the AoR named after, of at most
// limit contacts in whole AoRs, appended to buf[:0], and whether more
// follow: engine.Engine's ContactsPage and AoRsPage.
type pager[T any] func(buf []T, after string, limit int) (page []T, more bool)

// pages passes the pages of fetch to emit in order, from after l.after,
// until the list ends or emit returns false; with l.limit, only the first
// page. It returns the name of that page's last AoR, when l.limit cut the
// list short, else "". The pages share one buffer, so that the memory a
// listing takes does not grow with the table.
func pages[T any](l listing, fetch pager[T], name func(*T) string, emit func([]T) bool) (next string) {
	size := l.limit
	if size == 0 {
		size = streamPage
	}
	var page []T
	for after, more := l.after, true; more; {
		page, more = fetch(page, after, size)
		if !emit(page) || !more {
			return ""
		}
		after = name(&page[len(page)-1])
		if l.limit > 0 {
			return after
		}
	}
	return ""
}
