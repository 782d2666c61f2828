package web

import (
	"context"
	"iter"
	"math/rand/v2"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// browserBound only stops a broken browser run from hanging the suite;
// no assertion depends on it.
const browserBound = 60 * time.Second

// peer is a scripted SIP peer on loopback: it answers OPTIONS until told
// to drop them.
type peer struct {
	r    *responder.Responder
	dead atomic.Bool
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	p := &peer{}
	r, err := responder.Listen("127.0.0.1:0", func(netip.AddrPort) responder.Action {
		return responder.Action{Drop: p.dead.Load()}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p.r = r
	return p
}

func (p *peer) uri(user string) string { return "sip:" + user + "@" + p.r.Addr().String() }

// site is the daemon's engine, prober and HTTP server on loopback,
// qualifying one AoR per peer every second.
type site struct {
	url   string
	peers map[string]*peer
}

// startSite serves the AoRs named by names, each qualifying its own peer,
// with history from hist (nil: the engine's own).
func startSite(t *testing.T, hist HistorySource, names ...string) *site {
	t.Helper()
	return startSiteWith(t, func(*engine.Engine) Config { return Config{History: hist} }, nil, names...)
}

// startSiteWith is startSite with the server's configuration from
// config, which is given the engine, and each AoR's policy (nil: a
// probe a second, timeout 300 ms, N=1).
func startSiteWith(t *testing.T, config func(*engine.Engine) Config, policy *qualify.Policy, names ...string) *site {
	t.Helper()
	pr, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Prober: pr, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	s := &site{peers: map[string]*peer{}}
	var aors []engine.AoR
	if policy == nil {
		policy = &qualify.Policy{Frequency: time.Second, Timeout: 300 * time.Millisecond}
	}
	for _, n := range names {
		p := newPeer(t)
		s.peers[n] = p
		aors = append(aors, engine.AoR{Name: n, Contacts: []string{p.uri(n)}, Policy: policy})
	}
	cfg := config(e)
	cfg.Engine, cfg.Version = e, "test"
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.Run(ctx) })
	wg.Go(func() { srv.Run(ctx) })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.CloseClientConnections(); cancel(); hs.Close(); wg.Wait(); pr.Close() })
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	s.url = hs.URL
	return s
}

// browser is a headless Chromium tab that records console errors.
type browser struct {
	t    *testing.T
	ctx  context.Context // bounded by browserBound
	mu   sync.Mutex
	errs []string
}

// newBrowser starts Chromium with an empty profile and no network beyond
// loopback. A missing chromium skips the test, unless
// QUALIFYD_BROWSER=require (as `make test` sets) makes it a failure.
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("QUALIFYD_BROWSER") == "require" {
			t.Fatal("chromium is not installed (make deps installs it)")
		}
		t.Skip("chromium is not installed")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The viewport is emulated: a headless window is at least 500 px wide.
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(width), int64(height))); err != nil { // starts the browser, without a deadline
		t.Fatal(err)
	}
	ctx, cancelC := context.WithTimeout(tab, browserBound)
	t.Cleanup(cancelC)
	b := &browser{t: t, ctx: ctx}
	messages := chromedp.Console(tab)
	go b.record(messages)
	return b
}

// record keeps the errors and exceptions among messages (failed loads
// are browser log entries of type error) until the tab closes.
func (b *browser) record(messages iter.Seq2[chromedp.ConsoleMessage, error]) {
	for m, err := range messages {
		if err != nil {
			return
		}
		if m.Type == chromedp.ConsoleError || m.IsException() {
			b.mu.Lock()
			b.errs = append(b.errs, m.String()+" at "+m.URL)
			b.mu.Unlock()
		}
	}
}

// do runs steps in the tab, failing the test on an error.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// eval returns the value of the JavaScript expression expr.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// text returns the visible text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("%s: %v", sel, err)
	}
	return v
}

// wait waits until an element matching sel is visible.
func wait(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }

// noErrors fails the test for every console error logged so far.
func (b *browser) noErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("console: %s", e)
	}
}

// screenshot saves the whole page as name in dir and returns its path.
func (b *browser) screenshot(dir, name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// count returns how many elements match the CSS selector sel.
func (b *browser) count(sel string) int {
	b.t.Helper()
	return eval[int](b, `document.querySelectorAll(`+jsString(sel)+`).length`)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// chartHistories are three AoRs' day of minute buckets ending at end:
// alpha with two outages, bravo lossy but never unroutable, charlie with
// three outages.
func chartHistories(end time.Time) fakeHistory {
	day := func(aor string, seed uint64, outages, lossy []spell) engine.History {
		return synthHistory(shape{aor: aor, uri: "sip:" + aor + "@192.0.2.1", end: end, width: time.Minute,
			n: 1440, probes: 4, base: 18 * time.Millisecond, outages: outages, lossy: lossy, seed: seed})
	}
	return fakeHistory{
		"alpha":   day("alpha", 1, []spell{{200, 230}, {900, 905}}, nil),
		"bravo":   day("bravo", 2, nil, []spell{{300, 360}, {1000, 1010}}),
		"charlie": day("charlie", 3, []spell{{100, 120}, {600, 700}, {1300, 1320}}, []spell{{590, 600}}),
	}
}

// TestBrowserCharts loads GET / in Chromium at 1280 and 400 pixels wide:
// each AoR's chart is drawn with as many unroutable spells as its history
// has, the page fits the width, and nothing is logged as an error.
func TestBrowserCharts(t *testing.T) {
	want := map[string]int{"alpha": 2, "bravo": 0, "charlie": 3}
	s := startSite(t, chartHistories(time.Now()), "alpha", "bravo", "charlie")
	dir := t.ArtifactDir()
	for _, width := range []int{1280, 400} {
		b := newBrowser(t, width, 900)
		b.do(chromedp.Navigate(s.url+"/"), wait(`[data-aor="charlie"] svg.chart`))
		for aor, n := range want {
			row := `[data-aor="` + aor + `"]`
			if got := b.count(row + ` svg.chart`); got != 1 {
				t.Errorf("%d px: %s has %d charts, want 1", width, aor, got)
			}
			if got := b.count(row + ` svg.chart rect.down`); got != n {
				t.Errorf("%d px: %s has %d unroutable spells, want %d", width, aor, got, n)
			}
		}
		if scroll := eval[int](b, `document.documentElement.scrollWidth`); scroll > width {
			t.Errorf("%d px: the page is %d px wide", width, scroll)
		}
		t.Logf("screenshot %s", b.screenshot(dir, "charts-"+itoa(width)+".png"))
		b.do(chromedp.Click(chromedp.CSS(`[data-aor="charlie"] h2 a`)), wait(`.detail[data-aor="charlie"] svg.chart`))
		if got := b.count(`.detail svg.chart rect.down`); got != want["charlie"] {
			t.Errorf("%d px: charlie's page has %d unroutable spells, want %d", width, got, want["charlie"])
		}
		if got := b.count(`.detail tbody tr`); got != 1+8 { // one contact, eight policy options
			t.Errorf("%d px: charlie's page has %d table rows, want 9", width, got)
		}
		t.Logf("screenshot %s", b.screenshot(dir, "aor-"+itoa(width)+".png"))
		b.noErrors()
	}
}

// drawnTick is a tick as Chromium lays it out: its drawn width in px
// (box and stroke), the width of a bucket of its chart, how many changes
// it counts, its tooltip, and whether the point at its middle hovers it.
type drawnTick struct {
	Width, Bucket float64
	N             int
	Title         string
	Hovered       bool
}

// ticksOf returns the ticks of the chart under sel, whose history has
// buckets buckets.
func ticksOf(b *browser, sel string, buckets int) []drawnTick {
	b.t.Helper()
	return eval[[]drawnTick](b, `(() => {
		const svg = document.querySelector(`+jsString(sel+` svg.chart`)+`);
		const bucket = svg.getBoundingClientRect().width / `+itoa(buckets)+`;
		return Array.from(svg.querySelectorAll('.tick'), g => {
			const m = g.querySelector('.mark') || g, r = m.getBoundingClientRect(), title = g.querySelector('title');
			const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
			return {width: r.width + parseFloat(getComputedStyle(m).strokeWidth), bucket: bucket,
				n: Number(g.dataset.n || 1), title: title ? title.textContent : '',
				hovered: at !== null && at.closest('.tick') === g};
		});
	})()`)
}

// TestBrowserChartTicks: in Chromium at 1280 px, the status changes of
// an hour of minute buckets (tickedHistory: three 20 s apart in one
// bucket, a pair 2 s apart, one alone) are thin ticks on the row's chart
// and on the AoR's page: each narrower than a bucket, five of them, the
// pair one tick counting 2, each with its tooltip, which the point at the
// tick's middle hovers.
func TestBrowserChartTicks(t *testing.T) {
	s := startSite(t, fakeHistory{"delta": tickedHistory("delta", time.Now())}, "delta")
	b := newBrowser(t, 1280, 900)
	b.do(chromedp.Navigate(s.url+"/"), wait(`[data-aor="delta"] svg.chart`))
	check := func(page string, ticks []drawnTick) {
		t.Helper()
		counted := 0
		for _, k := range ticks {
			counted += k.N
			if k.Width >= k.Bucket || k.Width > 3 {
				t.Errorf("%s: a tick %.1f px wide, a bucket %.1f px: want a thin tick, narrower than its bucket", page, k.Width, k.Bucket)
			}
			if !strings.Contains(k.Title, "→") || (k.N > 1) != strings.HasPrefix(k.Title, itoa(k.N)+" changes:\n") || !k.Hovered {
				t.Errorf("%s: a tick of %d changes: tooltip %q, hovered at its middle %v", page, k.N, k.Title, k.Hovered)
			}
		}
		if len(ticks) != 5 || counted != 6 {
			t.Errorf("%s: %d ticks counting %d changes, want 5 counting the 6", page, len(ticks), counted)
		}
		if len(ticks) > 0 {
			t.Logf("%s: %d ticks, %.1f px wide in buckets of %.1f px", page, len(ticks), ticks[0].Width, ticks[0].Bucket)
		}
	}
	check("GET /", ticksOf(b, `[data-aor="delta"]`, 60))
	t.Logf("screenshot %s", b.screenshot(t.ArtifactDir(), "ticks-row.png"))
	b.do(chromedp.Click(chromedp.CSS(`[data-aor="delta"] h2 a`)), wait(`.detail[data-aor="delta"] svg.chart`))
	check("/aors/delta", ticksOf(b, `.detail[data-aor="delta"]`, 60))
	t.Logf("screenshot %s", b.screenshot(t.ArtifactDir(), "ticks-aor.png"))
	b.noErrors()
}

// TestBrowserLive: an AoR's peer dies and comes back; its row on the open
// page says so, from the event stream, without the page reloading.
func TestBrowserLive(t *testing.T) {
	s := startSite(t, nil, "alpha", "bravo")
	b := newBrowser(t, 1280, 900)
	bravo := `[data-aor="bravo"]`
	b.do(chromedp.Navigate(s.url+"/"), wait(bravo+`.up`), wait(`#live.on`))
	eval[bool](b, `window.notReloaded = true`)
	s.peers["bravo"].dead.Store(true)
	b.do(wait(bravo + `.down`))
	if word := b.text(bravo + ` .status`); word != "unavailable" {
		t.Errorf("bravo's status reads %q, want unavailable", word)
	}
	b.do(wait(bravo + ` .c-Unreachable`)) // the re-fetched row's counts
	if b.count(`[data-aor="alpha"].up`) != 1 {
		t.Error("alpha is no longer shown available")
	}
	t.Logf("screenshot %s", b.screenshot(t.ArtifactDir(), "live-down.png"))
	s.peers["bravo"].dead.Store(false)
	b.do(wait(bravo + `.up`))
	word, kept := b.text(bravo+` .status`), eval[bool](b, `window.notReloaded === true`)
	if word != "available" || !kept {
		t.Errorf("after recovery: status %q, page kept (not reloaded) %v", word, kept)
	}
	b.noErrors()
}

// TestBrowserLiveCleared: on an AoR's page, a contact with
// qualify_failures=3 misses one probe and answers the next; the
// failures cell goes to 1/3 and back to 0/3 from the event stream (the
// failure event, then the cleared one), without the page reloading.
func TestBrowserLiveCleared(t *testing.T) {
	s := startSiteWith(t, func(*engine.Engine) Config { return Config{} },
		&qualify.Policy{Frequency: time.Second, Timeout: 300 * time.Millisecond, Failures: 3}, "alpha")
	b := newBrowser(t, 1280, 900)
	const row = `[data-fragment="detail"] tbody tr `
	failures := func(want string) chromedp.Action[chromedp.Void] { // the failures column reads want
		return chromedp.Poll[chromedp.Void](`document.querySelector(` + jsString(row+`td:nth-child(12)`) + `)?.textContent === ` + jsString(want))
	}
	b.do(chromedp.Navigate(s.url+"/aors/alpha"), wait(`#live.on`), failures("0/3"))
	eval[bool](b, `window.notReloaded = true`)
	s.peers["alpha"].dead.Store(true)
	b.do(failures("1/3"))
	s.peers["alpha"].dead.Store(false)
	b.do(failures("0/3"))
	// Cleared, not recovered: fewer than 3 probes failed, so the contact
	// never went Unreachable (whose recovery would re-fetch the row too).
	if failed := b.text(row + `td:nth-child(10)`); failed != "1" && failed != "2" {
		t.Errorf("the contact's failed probes read %q, want 1 or 2: the row came back by another event than cleared", failed)
	}
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Error("the page reloaded")
	}
	b.noErrors()
}

// TestBrowserFilter submits the filter form: by name, then by status.
func TestBrowserFilter(t *testing.T) {
	s := startSite(t, nil, "alpha", "bravo", "charlie")
	s.peers["charlie"].dead.Store(true)
	b := newBrowser(t, 1280, 900)
	rows := func() string {
		return eval[string](b, `Array.from(document.querySelectorAll('[data-aor]'), e => e.dataset.aor).join(' ')`)
	}
	b.do(chromedp.Navigate(s.url+"/"), wait(`[data-aor="charlie"]`),
		chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), "RAV"), chromedp.Submit(chromedp.CSS(`form.filter`)),
		wait(`form.filter a`)) // the filtered page offers "clear"
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != "bravo" || !strings.Contains(loc, "q=RAV") {
		t.Errorf("name filter: rows %q at %s, want bravo", got, loc)
	}
	b.do(chromedp.Navigate(s.url+"/"), wait(`[data-aor="charlie"].down`),
		chromedp.SetValue(chromedp.CSS(`select[name="status"]`), "unavailable"), chromedp.Submit(chromedp.CSS(`form.filter`)),
		wait(`form.filter a`))
	if got := rows(); got != "charlie" {
		t.Errorf("status filter: rows %q, want charlie", got)
	}
	b.noErrors()
}

// TestBrowserScreenshot writes the README's picture of the status page to
// $QUALIFYD_SCREENSHOT (make screenshot): the demo's two AoRs qualifying
// the same scripted peer, with ten minutes of the demo's five-second
// buckets (demoHistories).
func TestBrowserScreenshot(t *testing.T) {
	out := os.Getenv("QUALIFYD_SCREENSHOT")
	if out == "" {
		t.Skip("QUALIFYD_SCREENSHOT is not set")
	}
	s := startSite(t, demoHistories(time.Now()), "asterisk", "qualifyd")
	b := newBrowser(t, 1280, 560)
	b.do(chromedp.Navigate(s.url+"/"), wait(`[data-aor="qualifyd"] svg.chart`), wait(`#live.on`))
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	b.noErrors()
}

// demoHistories are ten minutes of five-second buckets ending at end, as
// qualifyd demo's peer script plays them (a minute: healthy, one lost
// probe at 10 s, half the requests lost from 20 s, dead from 38 s, back at
// 50 s) for its AoRs: asterisk, unroutable after each lost probe until the
// next one 5 s later, and qualifyd, unroutable only while the peer is dead
// (three failures a second apart).
func demoHistories(end time.Time) fakeHistory {
	const width, n = 5 * time.Second, 120
	rng := rand.New(rand.NewPCG(2026, 11))
	start := end.Add(-n * width).Truncate(time.Minute)
	legacy := engine.History{AoR: "asterisk", Width: width}
	tuned := engine.History{AoR: "qualifyd", Width: width}
	for i := range n {
		at := start.Add(time.Duration(i) * width)
		rtt := time.Duration(400+rng.IntN(300)) * time.Microsecond
		ok := engine.Bucket{Start: at, Probes: 1, RTTMin: rtt, RTTP50: rtt, RTTMax: rtt * 13 / 10, Routable: width}
		lost, dead := false, false
		switch k := i % 12; {
		case k == 2:
			lost = true
		case k >= 4 && k <= 7:
			lost = rng.IntN(2) == 0
		case k == 8 || k == 9:
			dead = true
		}
		l, q := ok, ok
		switch {
		case dead:
			l = engine.Bucket{Start: at, Probes: 1, Failures: 1}
			q = engine.Bucket{Start: at, Probes: 2, Failures: 2}
		case lost:
			l = engine.Bucket{Start: at, Probes: 1, Failures: 1}
			q.Probes, q.Failures = 2, 1
		}
		legacy.Buckets = append(legacy.Buckets, l)
		tuned.Buckets = append(tuned.Buckets, q)
	}
	addChanges(&legacy, "sip:legacy@127.0.0.1", qualify.ReasonTimeout)
	addChanges(&tuned, "sip:tuned@127.0.0.1", qualify.ReasonTimeout)
	return fakeHistory{"asterisk": legacy, "qualifyd": tuned}
}

// addChanges records a change at each edge of h's routable time.
func addChanges(h *engine.History, uri string, why qualify.Reason) {
	for i := 1; i < len(h.Buckets); i++ {
		was, is := h.Buckets[i-1].Routable > 0, h.Buckets[i].Routable > 0
		switch {
		case was && !is:
			h.Changes = append(h.Changes, engine.Change{Time: h.Buckets[i].Start, URI: uri, From: qualify.Reachable, To: qualify.Unreachable, Reason: why})
		case !was && is:
			h.Changes = append(h.Changes, engine.Change{Time: h.Buckets[i].Start, URI: uri, From: qualify.Unreachable, To: qualify.Reachable})
		}
	}
}
