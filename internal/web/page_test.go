package web

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// rowNames returns the AoRs of the rows of a page, in order.
func rowNames(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<article class="row [a-z]+" data-aor="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestPageFilter: GET / shows the AoRs passing the name and status
// filters, unavailable ones first; a bad filter is a 400.
func TestPageFilter(t *testing.T) {
	tests := []struct {
		query string
		want  string
	}{
		{"", "carrier backup pbx07 phone"}, // carrier is unavailable
		{"?q=P", "backup pbx07 phone"},
		{"?q=+pbx+", "pbx07"},
		{"?status=unavailable", "carrier"},
		{"?status=available&q=ph", "phone"},
		{"?status=Unreachable", "carrier backup"}, // backup is latency-only: Unreachable, yet available
		{"?status=NonQualified", "phone"},
		{"?status=Reachable", "pbx07"},
		{"?q=nosuch", ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := scenarioEnv(t, Config{})
				w := v.do("GET", "/"+tt.query)
				if got := strings.Join(rowNames(w.Body.String()), " "); w.Code != http.StatusOK || got != tt.want {
					t.Errorf("rows %q (status %d), want %q", got, w.Code, tt.want)
				}
			})
		})
	}
	for _, bad := range []string{"?status=down", "?limit=0", "?limit=1001", "?after=%ff"} {
		synctest.Test(t, func(t *testing.T) {
			v := scenarioEnv(t, Config{})
			if w := v.do("GET", "/"+bad); w.Code != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", bad, w.Code)
			}
		})
	}
}

// TestPagePaging follows the next links of GET / with limit 2 and a
// filter, across engine pages of one contact: each AoR that passes is
// shown once, in name order, and the last page has no link.
func TestPagePaging(t *testing.T) {
	var aors []engine.AoR
	for i := range 7 {
		aors = append(aors, engine.AoR{Name: fmt.Sprintf("t%d", i), Contacts: numbered(fmt.Sprint("t", i), 1), Policy: new(qualify.DefaultPolicy())})
	}
	aors = append(aors, engine.AoR{Name: "pbx", Contacts: numbered("pbx", 2), Policy: new(qualify.DefaultPolicy())})
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, Config{PageLimit: 1}, engine.Config{}, aors...)
		var got []string
		target := "/?q=t&limit=2"
		for pages := 0; target != ""; pages++ {
			if pages > 4 {
				t.Fatal("more than 4 pages")
			}
			body := v.do("GET", target).Body.String()
			got = append(got, rowNames(body)...)
			target = ""
			if m := regexp.MustCompile(`<a href="([^"]*)" rel="next">`).FindStringSubmatch(body); m != nil {
				target = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		if strings.Join(got, " ") != "t0 t1 t2 t3 t4 t5 t6" {
			t.Errorf("rows over the pages: %v", got)
		}
	})
}

// TestChart draws a day of minute buckets: as many shaded spells as the
// history has outages, a tick per column with changes, a loss bar per
// column with failures, and the band and median line.
func TestChart(t *testing.T) {
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := synthHistory(shape{aor: "x", uri: "sip:x@192.0.2.1", end: end, width: time.Minute, n: 1440, probes: 2,
		base: 20 * time.Millisecond, outages: []spell{{60, 66}, {600, 700}, {1430, 1440}}, lossy: []spell{{300, 306}}})
	tests := []struct {
		sz                   chartSize
		spells, ticks, lossy int
	}{
		{rowChart, 3, 5, 1 + 17 + 2 + 1}, // the last outage ends with the chart: no tick
		{bigChart, 3, 5, 3 + 50 + 5 + 3},
	}
	for _, tt := range tests {
		c := drawChart(&h, tt.sz, end, new(chartBuf))
		svg := string(c.SVG)
		if c.Spells != tt.spells || strings.Count(svg, `class="down"`) != tt.spells {
			t.Errorf("%d columns: %d spells, %d drawn, want %d", tt.sz.cols, c.Spells, strings.Count(svg, `class="down"`), tt.spells)
		}
		if n := strings.Count(svg, `class="tick"`); n != tt.ticks {
			t.Errorf("%d columns: %d ticks, want %d", tt.sz.cols, n, tt.ticks)
		}
		if n := strings.Count(svg, "z"); n != tt.lossy {
			t.Errorf("%d columns: %d loss bars, want %d", tt.sz.cols, n, tt.lossy)
		}
		for _, want := range []string{`class="band"`, `class="p50"`, "Reachable → Unreachable (timeout)"} {
			if !strings.Contains(svg, want) {
				t.Errorf("%d columns: no %q in\n%.2000s", tt.sz.cols, want, svg)
			}
		}
		if tt.sz.uris != strings.Contains(svg, "sip:x@192.0.2.1") {
			t.Errorf("%d columns: URIs in tooltips %v, want %v", tt.sz.cols, !tt.sz.uris, tt.sz.uris)
		}
		if tt.sz.spellTitles != strings.Contains(svg, "unroutable 13:00–13:06 (6m0s)") {
			t.Errorf("%d columns: spell tooltips %v, want %v", tt.sz.cols, !tt.sz.spellTitles, tt.sz.spellTitles)
		}
		if c.From != "24 h ago" || c.To != "12:00 UTC" || c.Scale != "100 ms" { // RTTs up to 55 ms
			t.Errorf("%d columns: axis %q to %q, scale %q", tt.sz.cols, c.From, c.To, c.Scale)
		}
	}
}

// tickedHistory is an hour of minute buckets ending at end, with six
// changes: three 20 s apart in one bucket, a pair 2 s apart, and one
// alone; the pair is closer than either chart's tick gap, the three are
// not.
func tickedHistory(aor string, end time.Time) engine.History {
	h := synthHistory(shape{aor: aor, uri: "sip:" + aor + "@192.0.2.1", end: end, width: time.Minute, n: 60, probes: 2, base: ms(20)})
	start := end.Add(-time.Hour)
	at := func(min, sec int) time.Time {
		return start.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second)
	}
	for i, t := range []time.Time{at(10, 5), at(10, 25), at(10, 45), at(30, 0), at(30, 2), at(45, 30)} {
		from, to := qualify.Reachable, qualify.Unreachable
		if i%2 == 1 {
			from, to = to, from
		}
		h.Changes = append(h.Changes, engine.Change{Time: t, URI: "sip:" + aor + "@192.0.2.1", From: from, To: to})
	}
	return h
}

// TestChartTicks: each change is a tick at its own time, so three in one
// bucket are three ticks at three places within its column; two closer
// than the tick gap are one tick that counts them, in its data-n and its
// tooltip.
func TestChartTicks(t *testing.T) {
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := tickedHistory("x", end)
	for _, sz := range []chartSize{rowChart, bigChart} {
		svg := string(drawChart(&h, sz, end, new(chartBuf)).SVG)
		unit := float64(sz.cols) / 60 // units a minute
		var xs []string
		for _, m := range regexp.MustCompile(`<path class="mark" d="M([0-9.]+),0v8"/>`).FindAllStringSubmatch(svg, -1) {
			xs = append(xs, m[1])
		}
		want := []string{}
		for _, minutes := range []float64{10 + 5.0/60, 10 + 25.0/60, 10 + 45.0/60, 30, 45.5} {
			want = append(want, strconv.FormatFloat(minutes*unit, 'f', 1, 64))
		}
		if strings.Join(xs, " ") != strings.Join(want, " ") {
			t.Errorf("%d units: ticks at %v, want %v", sz.cols, xs, want)
		}
		if n := strings.Count(svg, `data-n="2"><title>2 changes:`+"\n"); n != 1 || strings.Count(svg, "data-n=") != 1 {
			t.Errorf("%d units: %d counted ticks of 2, want 1:\n%s", sz.cols, n, svg)
		}
		if n := strings.Count(svg, "<title>"); n != 5 {
			t.Errorf("%d units: %d tooltips, want one a tick (5)", sz.cols, n)
		}
	}
}

// TestChartFewBuckets: a history shorter than the chart is drawn in a
// column per bucket; a bucket still filling counts only its elapsed time
// as known, and the first, where the history may have begun, only its
// routable time.
func TestChartFewBuckets(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := engine.History{AoR: "x", Width: 2 * time.Second, Buckets: []engine.Bucket{
		{Start: start, Probes: 1, RTTMin: ms(10), RTTP50: ms(10), RTTMax: ms(10), Routable: time.Second},
		{Start: start.Add(2 * time.Second), Probes: 1, Failures: 1, Routable: 0},
		{Start: start.Add(4 * time.Second), Probes: 1, RTTMin: ms(9), RTTP50: ms(9), RTTMax: ms(11), Routable: time.Second},
	}}
	c := drawChart(&h, rowChart, start.Add(5*time.Second), new(chartBuf))
	if c.Spells != 1 || !strings.Contains(string(c.SVG), `<rect class="down" x="80" width="80"`) {
		t.Errorf("spells %d:\n%s", c.Spells, c.SVG)
	}
	if c.From != "6 s ago" || c.To != "12:00:06 UTC" || c.Scale != "20 ms" {
		t.Errorf("axis %q to %q, scale %q", c.From, c.To, c.Scale)
	}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestPageWithoutHistory: an engine that keeps no history (see
// engine.Config.HistoryAoRs) gives rows without a chart.
func TestPageWithoutHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnvOf(t, Config{}, engine.Config{HistoryAoRs: -1})
		body := v.do("GET", "/").Body.String()
		if strings.Count(body, "no history kept") != 4 || strings.Contains(body, "<svg") {
			t.Errorf("page without history:\n%s", body)
		}
	})
}

// TestAoRPage: /aors/NAME shows the larger chart, the contacts, the
// changes newest first and the effective policy; its row fragment is the
// row of GET /; an unknown AoR is a 404.
func TestAoRPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		end := time.Now()
		hist := fakeHistory{"carrier": synthHistory(shape{aor: "carrier", uri: gw2URI, end: end, width: time.Minute,
			n: 30, probes: 1, base: ms(30), outages: []spell{{5, 7}, {20, 22}}})}
		v := scenarioEnv(t, Config{History: hist})
		body := v.do("GET", "/aors/carrier").Body.String()
		for _, want := range []string{`viewBox="0 0 720 170"`, gw2URI, gw3URI, "qualify_down_interval</th><td>10s",
			"qualify_2xx_only</th><td>true", "2 unroutable", `<span class="status">unavailable</span>`} {
			if !strings.Contains(body, want) {
				t.Errorf("AoR page without %q", want)
			}
		}
		first, last := strings.Index(body, "Unreachable → Reachable</li>"), strings.Index(body, "Reachable → Unreachable (timeout)</li>")
		if first < 0 || last < 0 || first > last {
			t.Errorf("changes not newest first")
		}
		row := v.do("GET", "/aors/carrier?fragment=row").Body.String()
		if !strings.HasPrefix(row, `<article class="row down" data-aor="carrier"`) || !strings.Contains(row, `viewBox="0 0 240 56"`) {
			t.Errorf("row fragment:\n%s", row)
		}
		if w := v.do("GET", "/aors/nosuch"); w.Code != http.StatusNotFound {
			t.Errorf("unknown AoR: %d", w.Code)
		}
		if d := v.do("GET", "/aors/pbx07?fragment=detail").Body.String(); !strings.HasPrefix(d, `<div class="detail up" data-aor="pbx07"`) {
			t.Errorf("detail fragment:\n%.300s", d)
		}
	})
}

// TestPageGzip: a client accepting gzip gets the same page compressed.
func TestPageGzip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		plain := v.do("GET", "/").Body.String()
		w := v.do("GET", "/", "Accept-Encoding", "gzip, br")
		zr, err := gzip.NewReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || w.Header().Get("Content-Encoding") != "gzip" || string(got) != plain {
			t.Errorf("gzipped page: %v, encoding %q, same page %v", err, w.Header().Get("Content-Encoding"), string(got) == plain)
		}
	})
}

// TestPageAssets: the style sheet and the script are served, cached for
// good under the tag the pages name; nothing else under /page/ is.
func TestPageAssets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, Config{}, engine.Config{})
		page := v.do("GET", "/").Body.String()
		for target, ctype := range map[string]string{"/page/style.css": "text/css", "/page/page.js": "text/javascript"} {
			if !strings.Contains(page, target+"?v="+assetTag) {
				t.Errorf("the page does not name %s?v=%s", target, assetTag)
			}
			w := v.do("GET", target+"?v="+assetTag)
			if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) ||
				!strings.Contains(w.Header().Get("Cache-Control"), "immutable") || w.Body.Len() < 1000 {
				t.Errorf("%s: %d %q %q, %d bytes", target, w.Code, w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"), w.Body.Len())
			}
		}
		for _, target := range []string{"/page/index.html", "/page/nosuch.js", "/page/"} {
			if w := v.do("GET", target); w.Code != http.StatusNotFound {
				t.Errorf("%s: %d, want 404", target, w.Code)
			}
		}
	})
}

// TestPageAgoAfterClockStep: the page says how long ago a contact was
// probed on the engine's clock, so a step of the system clock (chrony at
// boot, a resumed VM) moves neither the probe's time nor the "ago".
func TestPageAgoAfterClockStep(t *testing.T) {
	base := time.Now() // a reading with the monotonic clock, which synctest's times lack
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var step atomic.Int64
		now := func() time.Time { return enginetest.StepWall(base.Add(time.Since(t0)), time.Duration(step.Load())) }
		v := scenarioEnvOf(t, Config{}, engine.Config{Now: now})
		ago := regexp.MustCompile(`ok 200, [0-9]s ago`) // the scenario's last probe of pbx07: seconds ago
		before := ago.FindString(v.do("GET", "/aors/pbx07?fragment=detail").Body.String())
		step.Store(int64(-time.Hour))
		after := ago.FindString(v.do("GET", "/aors/pbx07?fragment=detail").Body.String())
		if before == "" || after != before {
			t.Errorf("last probe %q before the clock stepped back an hour, %q after: want the same few seconds", before, after)
		}
	})
}
