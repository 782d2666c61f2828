package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// The HTTP query parsers read what any client sends. Their targets hold
// that they never panic, that what they accept is within the documented
// bounds, and that an error's text is valid UTF-8 (it is sent as JSON).
// Corpora: testdata/fuzz/FuzzParseListing, FuzzLastEventID, FuzzParseReload.

// requestWith returns a GET request of the query rawQuery.
func requestWith(rawQuery string) *http.Request {
	return &http.Request{Method: "GET", URL: &url.URL{Path: "/api/v1/contacts", RawQuery: rawQuery}, Header: http.Header{}}
}

func checkErrText(t *testing.T, err error) {
	t.Helper()
	if err != nil && !utf8.ValidString(err.Error()) {
		t.Fatalf("error text is not UTF-8: %q", err.Error())
	}
}

func FuzzParseListing(f *testing.F) {
	for _, q := range []string{"", "aor=pbx07", "status=Reachable&limit=10", "after=s%FF&limit=1", "limit=0", "limit=10001",
		"status=Up", "aor=a&aor=b", "limit=%zz", "after=" + url.QueryEscape("pbx07-b") + "&status=Unreachable&limit=10000"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		l, err := parseListing(requestWith(rawQuery), contactParams, "contacts")
		checkErrText(t, err)
		if err != nil {
			return
		}
		if l.limit < 0 || l.limit > maxLimit || !utf8.ValidString(l.after) {
			t.Fatalf("accepted %q as %+v", rawQuery, l)
		}
		for k := range requestWith(rawQuery).URL.Query() {
			if !slices.Contains(contactParams, k) {
				t.Fatalf("accepted %q with parameter %q", rawQuery, k)
			}
		}
		if st, ok := qualify.ParseStatus(l.status.String()); l.hasStatus && (!ok || st != l.status) {
			t.Fatalf("status %v of %q does not read back", l.status, rawQuery)
		}
	})
}

func FuzzLastEventID(f *testing.F) {
	for _, c := range [][2]string{{"", ""}, {"0", ""}, {"", "42"}, {"18446744073709551615", ""}, {"18446744073709551616", ""},
		{"x1", ""}, {"-1", "7"}, {"", "%ff"}, {"007", ""}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		r := requestWith("last_event_id=" + url.QueryEscape(query))
		if header != "" {
			r.Header["Last-Event-Id"] = []string{header}
		}
		id, replay, err := lastEventID(r)
		checkErrText(t, err)
		v := header
		if v == "" {
			v = query
		}
		switch {
		case err != nil && (v == "" || replay):
			t.Fatalf("%q: error %v with replay %v", v, err, replay)
		case err == nil && replay != (v != ""):
			t.Fatalf("%q: replay %v", v, replay)
		case replay:
			if n, perr := strconv.ParseUint(v, 10, 64); perr != nil || n != id {
				t.Fatalf("%q: id %d", v, id)
			}
		}
	})
}

func FuzzParseReload(f *testing.F) {
	for _, q := range []string{"", "force=1", "force=0", "force=true", "force=yes", "force=1&force=1", "forc=1", "force", "force=1;x", "%"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		force, err := parseReload(rawQuery)
		checkErrText(t, err)
		if err != nil {
			return
		}
		q, perr := url.ParseQuery(rawQuery)
		if perr != nil || len(q) > 1 || len(q) == 1 && len(q["force"]) != 1 {
			t.Fatalf("accepted %q (%v)", rawQuery, q)
		}
		if want := q.Get("force") == "1" || q.Get("force") == "true"; force != want {
			t.Fatalf("%q: force %v", rawQuery, force)
		}
	})
}
