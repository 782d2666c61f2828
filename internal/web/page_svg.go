package web

import (
	"html/template"
	"slices"
	"strconv"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// chartSize is a chart's drawing area in SVG user units: cols columns of
// one unit each, the RTT band on top and the loss lane under it. The SVG
// stretches to its box (preserveAspectRatio none), so only strokes keep
// their width: a status change is a tick, a stroke at its time, as thin
// on a wide screen as on a narrow one. Changes closer than gap units
// share one tick, which counts them; its tooltip lists at most lines
// changes, with their contacts' URIs if uris; spells have tooltips only
// with spellTitles. Tooltips are most of a chart's bytes, so lines bounds
// them.
type chartSize struct {
	cols, height, band int
	lines              int
	gap                float64
	uris, spellTitles  bool
}

var (
	// rowChart is the chart of a row of GET /: 24 h in 240 columns of 6
	// minutes at the default one-minute buckets; at 1280 px a unit is
	// about 4 px.
	rowChart = chartSize{cols: 240, height: 56, band: 42, lines: 1, gap: 1}
	// bigChart is the chart of /aors/NAME; at 1280 px a unit is about
	// 1.7 px.
	bigChart = chartSize{cols: 720, height: 170, band: 136, lines: 6, gap: 3, uris: true, spellTitles: true}
)

// tickHeight is a tick's length down from the chart's top, in units.
const tickHeight = 8

// column is the history of one chart column: one or more whole buckets.
type column struct {
	start, end       time.Time
	probes, failures int
	// rttMin and rttMax bound the column's RTTs; rttP50 is the median
	// estimate, the mean of its buckets' medians weighted by successes.
	rttMin, rttP50, rttMax time.Duration
	// known is the time the column's buckets cover up to now, routable
	// the time the AoR was available in them. A bucket without probes
	// counts too: a dead contact probed once every F or D
	// leaves most buckets without one.
	known, routable time.Duration
}

// down reports whether the AoR was unroutable for more than 1% of the
// column's known time.
func (c *column) down() bool { return c.known > 0 && c.routable*100 < c.known*99 }

// columns folds h's buckets into at most n columns of whole buckets, at
// most as many as there are buckets. now bounds the latest bucket, which
// is still filling.
func columns(buf []column, h *engine.History, n int, now time.Time) []column {
	k := min(n, len(h.Buckets))
	cols := slices.Grow(buf[:0], k)[:k]
	for i := range cols {
		lo, hi := i*len(h.Buckets)/k, (i+1)*len(h.Buckets)/k
		cols[i] = foldBuckets(h.Buckets[lo:hi], h.Width, now, lo == 0)
	}
	return cols
}

// foldBuckets returns the column of bs, consecutive buckets of width w,
// the history's first bucket among them if first. The first bucket is
// known only for its routable time: buckets are aligned to the clock, so
// the history may have begun within it.
func foldBuckets(bs []engine.Bucket, w time.Duration, now time.Time, first bool) column {
	c := column{start: bs[0].Start, end: bs[len(bs)-1].Start.Add(w)}
	var weighted float64
	for i := range bs {
		b := &bs[i]
		c.probes, c.failures = c.probes+b.Probes, c.failures+b.Failures
		if first && i == 0 {
			c.known += b.Routable
		} else {
			c.known += max(min(w, now.Sub(b.Start)), b.Routable)
		}
		c.routable += b.Routable
		if ok := b.Probes - b.Failures; ok > 0 && b.RTTMax > 0 {
			c.rttMin = minRTT(c.rttMin, b.RTTMin)
			c.rttMax = max(c.rttMax, b.RTTMax)
			weighted += float64(b.RTTP50) * float64(ok)
		}
	}
	if ok := c.probes - c.failures; ok > 0 && c.rttMax > 0 {
		c.rttP50 = time.Duration(weighted / float64(ok))
	}
	return c
}

// minRTT is the smaller of two RTTs, zero meaning none yet.
func minRTT(a, b time.Duration) time.Duration {
	if a == 0 {
		return b
	}
	return min(a, b)
}

// chart is one AoR's drawn history.
type chart struct {
	// SVG is the inline <svg> element.
	SVG template.HTML
	// From and To label the time axis, Scale the top of the RTT axis.
	From, To, Scale string
	// Spells is the number of unroutable spells shaded.
	Spells int
}

// chartBuf is the memory charts are drawn in, reused from chart to chart
// of a page: a page allocates its buffers once, not once per row.
type chartBuf struct {
	cols               []column
	svg, band, p50, ls []byte
}

// drawChart draws h at size sz in buf: unroutable spells shaded, the RTT
// band (min to max) with the median line, loss as a bar per column, and
// the status changes as ticks with their tooltips, smokeping style.
func drawChart(h *engine.History, sz chartSize, now time.Time, buf *chartBuf) chart {
	buf.cols = columns(buf.cols, h, sz.cols, now)
	cols := buf.cols
	if len(cols) == 0 {
		return chart{}
	}
	d := &drawing{sz: sz, cols: cols, scale: rttScale(cols), b: buf.svg[:0], buf: buf}
	d.open(h.AoR)
	spells := d.spells()
	d.band()
	d.loss()
	d.ticks(h.Changes)
	d.b = append(d.b, "</svg>"...)
	buf.svg = d.b
	start, end := cols[0].start, cols[len(cols)-1].end
	return chart{SVG: template.HTML(d.b), Spells: spells, Scale: msText(d.scale),
		From: spanText(end.Sub(start)) + " ago", To: end.UTC().Format(clockLayout(h.Width)) + " UTC"}
}

// spanText prints a chart's time span in its largest whole unit.
func spanText(d time.Duration) string {
	switch {
	case d >= 2*time.Hour:
		return itoa(int(d.Round(time.Hour)/time.Hour)) + " h"
	case d >= 2*time.Minute:
		return itoa(int(d.Round(time.Minute)/time.Minute)) + " min"
	}
	return itoa(int(d.Round(time.Second)/time.Second)) + " s"
}

// clockLayout is how the time axis and tooltips print times: to the
// second for buckets shorter than a minute.
func clockLayout(width time.Duration) string {
	if width < time.Minute {
		return time.TimeOnly
	}
	return "15:04"
}

// drawing is a chart being written as SVG into b.
type drawing struct {
	b     []byte
	sz    chartSize
	cols  []column
	scale time.Duration // the RTT at the top of the band
	buf   *chartBuf     // the paths' scratch
}

func (d *drawing) open(aor string) {
	d.b = append(d.b, `<svg class="chart" viewBox="0 0 `...)
	d.b = strconv.AppendInt(d.b, int64(d.sz.cols), 10)
	d.b = append(d.b, ' ')
	d.b = strconv.AppendInt(d.b, int64(d.sz.height), 10)
	d.b = append(d.b, `" preserveAspectRatio="none" role="img" aria-label="history of `...)
	d.b = append(d.b, template.HTMLEscapeString(aor)...)
	d.b = append(d.b, `"><rect class="lane" width="100%" height="100%"/>`...)
}

// x is the left edge of column i (len(cols) for the right edge).
func (d *drawing) x(i int) int { return i * d.sz.cols / len(d.cols) }

// y is the height of rtt in the band.
func (d *drawing) y(rtt time.Duration) int {
	return d.sz.band - int(min(rtt, d.scale)*time.Duration(d.sz.band)/d.scale)
}

// num appends n and then the byte after.
func (d *drawing) num(n int, after byte) {
	d.b = strconv.AppendInt(d.b, int64(n), 10)
	if after != 0 {
		d.b = append(d.b, after)
	}
}

// spells shades each run of down columns, with its times in a tooltip,
// and returns how many it shaded.
func (d *drawing) spells() int {
	n := 0
	for i := 0; i < len(d.cols); i++ {
		if !d.cols[i].down() {
			continue
		}
		j := i
		var lost time.Duration
		for ; j < len(d.cols) && d.cols[j].down(); j++ {
			lost += d.cols[j].known - d.cols[j].routable
		}
		title := ""
		if d.sz.spellTitles {
			title = "unroutable " + d.clock(d.cols[i].start) + "–" + d.clock(d.cols[j-1].end) + " (" + lost.Round(time.Second).String() + ")"
		}
		d.spell(d.x(i), d.x(j)-d.x(i), title)
		n, i = n+1, j
	}
	return n
}

// clock prints t as the time axis does.
func (d *drawing) clock(t time.Time) string {
	return t.UTC().Format(clockLayout(d.cols[0].end.Sub(d.cols[0].start)))
}

// spell appends a shaded spell from x, w wide and the chart's height
// (in the style sheet), with title as its tooltip unless empty.
func (d *drawing) spell(x, w int, title string) {
	d.b = append(d.b, `<rect class="down" x="`...)
	d.num(x, '"')
	d.b = append(d.b, ` width="`...)
	d.num(max(w, 1), '"')
	if title == "" {
		d.b = append(d.b, `/>`...)
		return
	}
	d.b = append(d.b, `><title>`...)
	d.b = append(d.b, template.HTMLEscapeString(title)...)
	d.b = append(d.b, `</title></rect>`...)
}

// band draws, for each run of columns with RTTs, the min-max band as one
// closed step outline and the median as a step line.
func (d *drawing) band() {
	band, p50 := d.buf.band[:0], d.buf.p50[:0]
	for i := 0; i < len(d.cols); i++ {
		if d.cols[i].rttP50 == 0 {
			continue
		}
		j := i
		for j+1 < len(d.cols) && d.cols[j+1].rttP50 > 0 {
			j++
		}
		band = d.outline(band, i, j)
		p50 = d.steps(p50, i, j, func(c *column) int { return d.y(c.rttP50) })
		i = j
	}
	d.path("band", band)
	d.path("p50", p50)
	d.buf.band, d.buf.p50 = band, p50
}

// outline appends the closed band of columns i..j: their maxima left to
// right, then their minima right to left, at least a unit apart.
func (d *drawing) outline(p []byte, i, j int) []byte {
	p = d.steps(p, i, j, func(c *column) int { return d.y(c.rttMax) })
	for k := j; k >= i; k-- {
		p = append(p, 'V')
		p = strconv.AppendInt(p, int64(max(d.y(d.cols[k].rttMin), d.y(d.cols[k].rttMax)+1)), 10)
		p = append(p, 'H')
		p = strconv.AppendInt(p, int64(d.x(k)), 10)
	}
	return append(p, 'Z')
}

// steps appends the step line through y of columns i..j.
func (d *drawing) steps(p []byte, i, j int, y func(*column) int) []byte {
	p = append(p, 'M')
	p = strconv.AppendInt(p, int64(d.x(i)), 10)
	p = append(p, ',')
	p = strconv.AppendInt(p, int64(y(&d.cols[i])), 10)
	for k := i; k <= j; k++ {
		if k > i {
			p = append(p, 'V')
			p = strconv.AppendInt(p, int64(y(&d.cols[k])), 10)
		}
		p = append(p, 'H')
		p = strconv.AppendInt(p, int64(d.x(k+1)), 10)
	}
	return p
}

// path appends a path of class drawing p, if any.
func (d *drawing) path(class string, p []byte) {
	if len(p) == 0 {
		return
	}
	d.b = append(d.b, `<path class="`...)
	d.b = append(d.b, class...)
	d.b = append(d.b, `" d="`...)
	d.b = append(d.b, p...)
	d.b = append(d.b, `"/>`...)
}

// loss draws a bar per column with failures, its height the column's
// share of failed probes of the loss lane.
func (d *drawing) loss() {
	p := d.buf.ls[:0]
	lane := d.sz.height - d.sz.band - 2
	for i := range d.cols {
		c := &d.cols[i]
		if c.failures == 0 || c.probes == 0 {
			continue
		}
		h := max((c.failures*lane+c.probes-1)/c.probes, 1)
		p = append(p, 'M')
		p = strconv.AppendInt(p, int64(d.x(i)), 10)
		p = append(p, ',')
		p = strconv.AppendInt(p, int64(d.sz.height), 10)
		p = append(p, 'v')
		p = strconv.AppendInt(p, int64(-h), 10)
		p = append(p, 'h')
		p = strconv.AppendInt(p, int64(max(d.x(i+1)-d.x(i), 1)), 10)
		p = append(p, 'v')
		p = strconv.AppendInt(p, int64(h), 10)
		p = append(p, 'z')
	}
	d.path("loss", p)
	d.buf.ls = p
}

// ticks draws the status changes as ticks at their times: a change
// within gap units of the tick before it is counted in that tick, so
// that changes seconds apart stay legible, and changes further apart stay
// ticks of their own, within one column too.
func (d *drawing) ticks(changes []engine.Change) {
	layout := clockLayout(d.cols[0].end.Sub(d.cols[0].start))
	for i := 0; i < len(changes); {
		x, in := d.at(changes[i].Time)
		j := i + 1
		for j < len(changes) {
			if next, ok := d.at(changes[j].Time); !ok || !in || next-x >= d.sz.gap {
				break
			}
			j++
		}
		if in {
			d.tick(x, changes[i:j], layout)
		}
		i = j
	}
}

// at returns t's place on the time axis in units, and false outside the
// chart.
func (d *drawing) at(t time.Time) (float64, bool) {
	start, end := d.cols[0].start, d.cols[len(d.cols)-1].end
	if t.Before(start) || !t.Before(end) {
		return 0, false
	}
	return float64(t.Sub(start)) * float64(d.sz.cols) / float64(end.Sub(start)), true
}

// tick appends the tick of changes cs at x: a group with its tooltip
// (the count of several, then the latest sz.lines of them, one a line),
// a wide transparent stroke to hover and the thin one drawn, both
// tickHeight long. data-n counts a tick's changes when there are several.
func (d *drawing) tick(x float64, cs []engine.Change, layout string) {
	d.b = append(d.b, `<g class="tick"`...)
	if len(cs) > 1 {
		d.b = append(d.b, ` data-n="`...)
		d.num(len(cs), '"')
	}
	d.b = append(d.b, `><title>`...)
	if len(cs) > 1 {
		d.num(len(cs), 0)
		d.b = append(d.b, " changes:\n"...)
	}
	if n := d.sz.lines; len(cs) > n {
		d.b = append(d.b, '+')
		d.num(len(cs)-n, 0)
		d.b = append(d.b, " earlier, then\n"...)
		cs = cs[len(cs)-n:]
	}
	for i := range cs {
		if i > 0 {
			d.b = append(d.b, '\n')
		}
		d.b = appendChange(d.b, &cs[i], layout, d.sz.uris, template.HTMLEscapeString)
	}
	d.b = append(d.b, `</title>`...)
	for _, class := range []string{"hit", "mark"} {
		d.b = append(d.b, `<path class="`...)
		d.b = append(d.b, class...)
		d.b = append(d.b, `" d="M`...)
		d.b = strconv.AppendFloat(d.b, x, 'f', 1, 64)
		d.b = append(d.b, ",0v"...)
		d.num(tickHeight, '"')
		d.b = append(d.b, `/>`...)
	}
	d.b = append(d.b, `</g>`...)
}

// changeText is one change as the change list prints it.
func changeText(c *engine.Change, layout string) string {
	return string(appendChange(nil, c, layout, true, func(s string) string { return s }))
}

// appendChange appends c: its time in layout, its contact's URI if uri,
// the statuses and the reason, the text from outside escaped by esc.
func appendChange(b []byte, c *engine.Change, layout string, uri bool, esc func(string) string) []byte {
	b = c.Time.UTC().AppendFormat(b, layout)
	if uri {
		b = append(b, ' ')
		b = append(b, esc(c.URI)...)
	}
	b = append(b, ' ')
	b = append(b, c.From.String()...)
	b = append(b, " → "...)
	b = append(b, c.To.String()...)
	if c.Reason == qualify.ReasonNone {
		return b
	}
	b = append(b, " ("...)
	b = append(b, reasonText(c.Reason, c.Code)...)
	if c.Detail != "" {
		b = append(b, ": "...)
		b = append(b, esc(c.Detail)...)
	}
	return append(b, ')')
}

// rttScale is the top of the RTT axis: the largest RTT of cols, rounded
// up to 1, 2 or 5 times a power of ten milliseconds.
func rttScale(cols []column) time.Duration {
	var top time.Duration
	for i := range cols {
		top = max(top, cols[i].rttMax)
	}
	for unit := 100 * time.Microsecond; ; unit *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if top <= m*unit {
				return m * unit
			}
		}
	}
}

// msText prints d in milliseconds, to three significant digits below
// 100 ms.
func msText(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms >= 100 {
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
}
