package web

import (
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// HistorySource is what the status page draws its charts from:
// *engine.Engine.
type HistorySource interface {
	// History returns the recent past of the AoR named name; false
	// when none is kept.
	History(name string) (engine.History, bool)
}

// pageFiles are the status page's templates, style sheet and script.
//
//go:embed page
var pageFiles embed.FS

var pageTemplates = template.Must(template.New("").ParseFS(pageFiles, "page/*.html"))

// assetTag names the current style sheet and script in their URLs, so
// that they can be cached for good: a hash of both.
var assetTag = func() string {
	h := sha256.New()
	for _, name := range []string{"page/style.css", "page/page.js"} {
		b, _ := pageFiles.ReadFile(name) // embedded: cannot fail
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}()

// pageAsset serves GET /page/{file}?v=TAG: the style sheet or the script,
// cached for a year (a new version has a new tag).
func (s *Server) pageAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := pageFiles.ReadFile("page/" + name)
	if err != nil || !strings.HasSuffix(name, ".css") && !strings.HasSuffix(name, ".js") {
		writeError(w, http.StatusNotFound, "no file "+quote(name))
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

// Paging of GET /: AoRs a page.
const (
	defaultPageAoRs = 50
	maxPageAoRs     = 1000
)

// pageFilter is what GET / was asked for: the AoRs whose name contains
// Name (ignoring case) and whose status is Status, a page of Limit of
// them after the AoR named After.
type pageFilter struct {
	Name, Status, After string
	Limit               int
}

// statusFilters are the values of the page's status filter: an AoR's
// availability, or a status one of its contacts has.
var statusFilters = []string{"unavailable", "available", "Unreachable", "Reachable", "NonQualified"}

// parsePageFilter reads q, status, after and limit, the listing's paging
// with limit counting AoRs.
func parsePageFilter(r *http.Request) (pageFilter, error) {
	q := r.URL.Query()
	f := pageFilter{Name: strings.TrimSpace(q.Get("q")), Status: q.Get("status"), After: q.Get("after"), Limit: defaultPageAoRs}
	if f.Status != "" && !slices.Contains(statusFilters, f.Status) {
		return f, errors.New("bad status " + quote(f.Status) + ": want one of " + strings.Join(statusFilters, ", "))
	}
	if !utf8.ValidString(f.After) || !utf8.ValidString(f.Name) {
		return f, errors.New("bad after or q: want UTF-8 text")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageAoRs {
			return f, errors.New("bad limit " + quote(v) + ": want a number of AoRs from 1 to " + itoa(maxPageAoRs))
		}
		f.Limit = n
	}
	return f, nil
}

// keep reports whether a passes the filter.
func (f *pageFilter) keep(a *engine.AoRSnapshot) bool {
	if f.Name != "" && !strings.Contains(strings.ToLower(a.Name), strings.ToLower(f.Name)) {
		return false
	}
	switch f.Status {
	case "":
		return true
	case "available":
		return a.Available
	case "unavailable":
		return !a.Available
	}
	st, _ := qualify.ParseStatus(f.Status)
	return slices.ContainsFunc(a.Contacts, func(c engine.ContactSnapshot) bool { return c.Status == st })
}

// query is the filter as the URL of the page after the AoR named after.
func (f *pageFilter) query(after string) string {
	v := url.Values{}
	for k, s := range map[string]string{"q": f.Name, "status": f.Status, "after": after} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Limit != defaultPageAoRs {
		v.Set("limit", itoa(f.Limit))
	}
	return "/?" + v.Encode()
}

// indexData is the model of GET /.
type indexData struct {
	Title   string
	Asset   string // assetTag
	Summary summaryData
	Filter  pageFilter
	Options []string
	Rows    []rowData
	// Next is the URL of the next page; empty on the last.
	Next string
}

// page serves GET /: the summary strip and a row per AoR of one page of
// the AoRs passing the filter, unavailable ones first; ?fragment=summary
// serves the strip alone.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	f, err := parsePageFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := s.cfg.Engine.Now() // the engine's clock, as its snapshots' times: a step of the system clock moves neither
	if r.URL.Query().Get("fragment") == "summary" {
		render(w, r, "summary", s.summary(now))
		return
	}
	d := indexData{Title: "qualifyd", Asset: assetTag, Filter: f, Options: statusFilters, Summary: s.summary(now)}
	var next string
	d.Rows, next = s.pageRows(&f, now)
	if next != "" {
		d.Next = f.query(next)
	}
	render(w, r, "index", d)
}

// pageRows returns the rows of the first f.Limit AoRs after f.After that
// pass f, unavailable first, and the name of the last row's AoR when
// more pass. It takes the AoRs from the engine PageLimit contacts at a
// time: a snapshot of the whole table held the engine's lock for a
// second at a million contacts.
func (s *Server) pageRows(f *pageFilter, now time.Time) (rows []rowData, next string) {
	var buf []engine.AoRSnapshot
	var charts chartBuf
	for after, more := f.After, true; more; after = buf[len(buf)-1].Name {
		buf, more = s.cfg.Engine.AoRsPage(buf, after, s.cfg.PageLimit)
		for i := range buf {
			if !f.keep(&buf[i]) {
				continue
			}
			if len(rows) == f.Limit {
				next = rows[len(rows)-1].Name
				more = false
				break
			}
			rows = append(rows, s.row(&buf[i], now, &charts))
		}
		if len(buf) == 0 {
			break
		}
	}
	slices.SortStableFunc(rows, func(a, b rowData) int { return boolCmp(a.Available, b.Available) })
	return rows, next
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// render writes the template name with d as an HTML page that is never
// cached, gzipped when r accepts it: charts compress about eightfold.
func render(w http.ResponseWriter, r *http.Request, name string, d any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept-Encoding")
	var out io.Writer = w
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
		defer gz.Close()
		out = gz
	}
	_ = pageTemplates.ExecuteTemplate(out, name, d) // a failed write means the client left
}

// pageHistory returns the history of the AoR named name, if a source
// keeps it.
func (s *Server) pageHistory(name string) (engine.History, bool) {
	if s.cfg.History == nil {
		return engine.History{}, false
	}
	return s.cfg.History.History(name)
}

func itoa(n int) string { return strconv.Itoa(n) }
