package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/responder"
)

// The res_pjsip qualify patches of contrib/asterisk, held to qualifyd by
// the same timelines: one pjsip.conf is read by the patched Asterisk
// (peertest.AsteriskQualifyEnv), by qualifyd and by the unpatched
// Asterisk, and each AoR's contact is a scriptedPeer that runs the same
// script for every qualifier on its own count of OPTIONS. The lines each
// prints for an AoR must be the same, in the same order; the timings are
// measured from the OPTIONS the peer saw and the lines' own timestamps,
// logged, and bounded with the headroom of a loaded 2-core machine
// (qualifyBound), except the 0.3 s between the two detections.
// The tests run in parallel with one another: each has its own
// processes and ports, and they wait on timers far more than they work.

const (
	// qualifyBound only stops a broken run.
	qualifyBound = 90 * time.Second
	// detectionSkew is the bound between Asterisk's and
	// qualifyd's detection of one outage.
	detectionSkew = 300 * time.Millisecond
	// lateness is how late a probe may go out on a loaded machine.
	lateness = time.Second
)

// seedQualify is the scaled seed policy (F=6, T=1, N=3, R=1).
const seedQualify = "qualify_frequency=6\nqualify_timeout=1\nqualify_failures=3\nqualify_retry_interval=1\n"

// probeSeen is one OPTIONS a scriptedPeer received.
type probeSeen struct {
	at      time.Time
	dropped bool
}

// scriptedPeer answers or drops each qualifier's n-th OPTIONS (from 1) as
// its script says, and records them per qualifier (source address). A
// retransmission is not another OPTIONS: it gets what the first got.
type scriptedPeer struct {
	r    *responder.Responder
	drop func(n int) bool

	mu      sync.Mutex
	seen    map[netip.AddrPort][]probeSeen
	decided map[string]bool
}

// newScriptedPeer starts a peer on an ephemeral loopback port.
func newScriptedPeer(t *testing.T, drop func(n int) bool) *scriptedPeer {
	t.Helper()
	p := &scriptedPeer{drop: drop, seen: map[netip.AddrPort][]probeSeen{}, decided: map[string]bool{}}
	r, err := responder.ListenTransactions("127.0.0.1:0", func(src netip.AddrPort, tx string) responder.Action {
		p.mu.Lock()
		defer p.mu.Unlock()
		d, ok := p.decided[tx]
		if !ok {
			d = p.drop(len(p.seen[src]) + 1)
			p.decided[tx] = d
			p.seen[src] = append(p.seen[src], probeSeen{at: time.Now(), dropped: d})
		}
		return responder.Action{Drop: d}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p.r = r
	return p
}

// uri is the contact URI of the peer for AoR aor.
func (p *scriptedPeer) uri(aor string) string { return "sip:" + aor + "@" + p.r.Addr().String() }

// contact is how the lines name the peer's contact of AoR aor.
func (p *scriptedPeer) contact(aor string) string { return "Contact " + aor + "/" + p.uri(aor) }

// probes returns what src sent so far.
func (p *scriptedPeer) probes(src netip.AddrPort) []probeSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[src])
}

// logLine is one line a qualifier printed, with its own timestamp.
type logLine struct {
	at   time.Time
	text string
}

// qualifier is a qualifyd or an Asterisk whose lines the test reads.
type qualifier struct {
	name  string
	src   netip.AddrPort // where its OPTIONS come from
	lines func() []logLine
}

// astLineRE is a line of the Asterisk's "qualify" log file (logger.conf
// of qualifyAsterisk): "[2026-12-02 13:40:00.123] VERBOSE[77] file.c: text".
var astLineRE = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] [A-Z]+\[\d+\](?:\[[^\]]*\])? [^:]+: (.*)$`)

// qualdLineRE is a line of `qualifyd run --log-format text`.
var qualdLineRE = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] (.*)$`)

// parseLines reads the lines of text that re matches (timestamp, text).
func parseLines(text string, re *regexp.Regexp) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05.000", m[1], time.Local)
		if err != nil {
			continue
		}
		out = append(out, logLine{at: at, text: strings.TrimRight(m[2], " ")})
	}
	return out
}

// qualifyAsterisk starts an Asterisk of the build env names with pjsip.conf
// conf (its transport on a.SIPPort: conf is a format with one %d) and a
// "qualify" log file of verbose lines with millisecond timestamps.
func qualifyAsterisk(t *testing.T, env, name, conf string) (*peertest.Asterisk, *qualifier) {
	t.Helper()
	a := peertest.NewAsteriskFrom(t, env)
	a.Write("logger.conf", "[general]\ndateformat=%F %T.%3q\n[logfiles]\nmessages => notice,warning,error,verbose\nqualify => verbose,error\n")
	a.Write("pjsip.conf", fmt.Sprintf(conf, a.SIPPort))
	a.Write("extensions.conf", "[qualify-e2e]\nexten => _c.,1,Set(DB(e2e/${EXTEN:1})=${PJSIP_DIAL_CONTACTS(${EXTEN:1})}x)\n same => n,Hangup()\n")
	a.Start()
	q := &qualifier{name: name, src: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(a.SIPPort))}
	q.lines = func() []logLine {
		b, _ := os.ReadFile(filepath.Join(a.Dir, "log", "qualify"))
		return parseLines(string(b), astLineRE)
	}
	return a, q
}

// qualifydOn starts qualifyd on the configuration file conf, sending from
// a port of its own.
func qualifydOn(t *testing.T, conf string) *qualifier {
	t.Helper()
	port := peertest.FreePort(t, "udp")
	d := startDaemon(t, "--config", conf, "--http", "", "--log-format", "text", "--sip-bind", fmt.Sprintf("127.0.0.1:%d", port))
	var mu sync.Mutex
	var got []string
	go func() {
		for l := range d.lines {
			mu.Lock()
			got = append(got, l)
			mu.Unlock()
		}
	}()
	return &qualifier{name: "qualifyd", src: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)),
		lines: func() []logLine {
			mu.Lock()
			defer mu.Unlock()
			return parseLines(strings.Join(got, "\n"), qualdLineRE)
		}}
}

// aorLines returns q's lines about AoR aor (its contacts and its
// endpoint of the same name).
func (q *qualifier) aorLines(aor string) []logLine {
	var out []logLine
	for _, l := range q.lines() {
		if strings.HasPrefix(l.text, "Contact "+aor+"/") || l.text == "Endpoint "+aor+" is now Reachable" || l.text == "Endpoint "+aor+" is now Unreachable" {
			out = append(out, l)
		}
	}
	return out
}

// rttRE is a non-zero RTT: it differs from one qualifier to the other.
var rttRE = regexp.MustCompile(`RTT: (?:[1-9]\d*\.\d{3}|0\.\d*[1-9]\d*) msec`)

// texts is the lines' text with each non-zero RTT written "RTT: R msec".
func texts(ls []logLine) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = rttRE.ReplaceAllString(l.text, "RTT: R msec")
	}
	return out
}

// awaitLine waits until q has printed, about aor, a line containing want
// (the n-th such line, from 1) and returns it.
func (q *qualifier) awaitLine(t *testing.T, aor, want string, n int) logLine {
	t.Helper()
	var found logLine
	eventually(t, qualifyBound, fmt.Sprintf("%s: line %d with %q", q.name, n, want), func() bool {
		k := 0
		for _, l := range q.aorLines(aor) {
			if strings.Contains(l.text, want) {
				if k++; k == n {
					found = l
					return true
				}
			}
		}
		return false
	})
	return found
}

// seedConf is the side-by-side pjsip.conf: the seed timeline's AoR pbx07,
// the latency-only AoR lat, and plain, with Asterisk's options only.
func seedConf(pbx07, lat, plain *scriptedPeer) string {
	return "[global]\ntype=global\nmax_initial_qualify_time=2\n\n" +
		"[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n" +
		"[pbx07]\ntype=endpoint\naors=pbx07\ncontext=qualify-e2e\n\n" +
		"[pbx07]\ntype=aor\ncontact=" + pbx07.uri("pbx07") + "\n" + seedQualify + "\n" +
		"[lat]\ntype=endpoint\naors=lat\ncontext=qualify-e2e\n\n" +
		"[lat]\ntype=aor\ncontact=" + lat.uri("lat") + "\n" + seedQualify + "qualify_latency_only=yes\n\n" +
		"[plain]\ntype=endpoint\naors=plain\ncontext=qualify-e2e\n\n" +
		"[plain]\ntype=aor\ncontact=" + plain.uri("plain") + "\nqualify_frequency=6\nqualify_timeout=1\n"
}

// seedDrops is the seed timeline's script for pbx07: two answered
// OPTIONS, one lost (3), answered (4), lost (5, 6: the success between
// resets the count), answered (7), dead (8, 9, 10), back (11 on).
func seedDrops(n int) bool { return n == 3 || n == 5 || n == 6 || n == 8 || n == 9 || n == 10 }

// latDrops is lat's script: answered once, then dead for a minute (the
// probes of a down contact go out on the down backoff, T + 1, 2, 4 s,
// then T + F = 7 s apart), then back.
func latDrops(n int) bool { return n >= 2 && n <= latLastDrop }

// latLastDrop is the last OPTIONS lat drops: the three of N are sent at
// 0, 2 and 4 s, the down ones at 6, 9, 14, 21, 28, ... 63 s.
const latLastDrop = 14

// plainDrops is plain's script: one lost OPTIONS among answered ones.
func plainDrops(n int) bool { return n == 3 }

// TestAsteriskQualifySideBySide runs the seed timeline, a success between
// misses, latency-only for a minute and Asterisk's options only in the
// patched Asterisk, qualifyd and the unpatched Asterisk at once, on one
// pjsip.conf.
func TestAsteriskQualifySideBySide(t *testing.T) {
	t.Parallel()
	pbx07, lat, plain := newScriptedPeer(t, seedDrops), newScriptedPeer(t, latDrops), newScriptedPeer(t, plainDrops)
	conf := seedConf(pbx07, lat, plain)
	patched, ast := qualifyAsterisk(t, peertest.AsteriskQualifyEnv, "patched Asterisk", conf)
	unpatchedAst, unpatched := qualifyAsterisk(t, peertest.AsteriskEnv, "unpatched Asterisk", conf)
	qconf := filepath.Join(t.TempDir(), "pjsip.conf")
	writeFile(t, qconf, fmt.Sprintf(conf, patched.SIPPort))
	qd := qualifydOn(t, qconf)

	t.Run("unpatched Asterisk refuses the new options", func(t *testing.T) {
		for _, want := range []string{"qualify_failures"} {
			eventually(t, qualifyBound, "the unpatched Asterisk's error naming "+want, func() bool {
				return slices.ContainsFunc(unpatched.lines(), func(l logLine) bool { return strings.Contains(l.text, want) })
			})
		}
		out, err := unpatchedAst.CLI("pjsip show aors")
		if err != nil || !strings.Contains(out, "plain") || strings.Contains(out, "pbx07") || strings.Contains(out, "Aor:  lat") {
			t.Fatalf("the unpatched Asterisk's AoRs (plain only): %v\n%s", err, out)
		}
	})

	t.Run("seed timeline", func(t *testing.T) {
		for _, q := range []*qualifier{ast, qd} {
			q.awaitLine(t, "pbx07", pbx07.contact("pbx07")+" is now Reachable", 2)
		}
		want := []string{
			"Endpoint pbx07 is now Reachable",
			pbx07.contact("pbx07") + " is now Reachable.  RTT: R msec",
			pbx07.contact("pbx07") + " qualify failed (timeout): 1/3 failures, retrying in 1s",
			pbx07.contact("pbx07") + " qualify failed (timeout): 1/3 failures, retrying in 1s",
			pbx07.contact("pbx07") + " qualify failed (timeout): 2/3 failures, retrying in 1s",
			pbx07.contact("pbx07") + " qualify failed (timeout): 1/3 failures, retrying in 1s",
			pbx07.contact("pbx07") + " qualify failed (timeout): 2/3 failures, retrying in 1s",
			"Endpoint pbx07 is now Unreachable",
			pbx07.contact("pbx07") + " is now Unreachable.  RTT: 0.000 msec",
			"Endpoint pbx07 is now Reachable",
			pbx07.contact("pbx07") + " is now Reachable.  RTT: R msec",
		}
		detect := map[string]time.Duration{}
		for _, q := range []*qualifier{ast, qd} {
			got := q.aorLines("pbx07")
			if !slices.Equal(texts(got), want) {
				t.Fatalf("%s printed for pbx07:\n%s\nwant:\n%s", q.name, strings.Join(texts(got), "\n"), strings.Join(want, "\n"))
			}
			ps := pbx07.probes(q.src)
			if len(ps) < 11 {
				t.Fatalf("%s sent %d OPTIONS to pbx07, want at least 11", q.name, len(ps))
			}
			gap := gapOf(ps)
			t.Logf("%s: OPTIONS 1->2 %v (F), 3->4 %v (T+R), 8->9 %v, 9->10 %v, 10->11 %v",
				q.name, gap(1, 2), gap(3, 4), gap(8, 9), gap(9, 10), gap(10, 11))
			within(t, q.name+": healthy OPTIONS 1->2", gap(1, 2), 6*time.Second)
			within(t, q.name+": retry after one lost OPTIONS 3->4", gap(3, 4), 2*time.Second)
			within(t, q.name+": healthy after the retry's success 4->5", gap(4, 5), 6*time.Second)
			within(t, q.name+": retry 8->9", gap(8, 9), 2*time.Second)
			within(t, q.name+": retry 9->10", gap(9, 10), 2*time.Second)
			within(t, q.name+": first probe while down 10->11", gap(10, 11), 2*time.Second)
			unreachable := got[8].at
			detect[q.name] = unreachable.Sub(ps[7].at)
			sent := 0
			for _, p := range ps[7:] {
				if !p.at.After(unreachable) {
					sent++
				}
			}
			t.Logf("%s: Unreachable %v after the first OPTIONS of the outage, after %d OPTIONS", q.name, detect[q.name], sent)
			within(t, q.name+": detection from the first lost OPTIONS", detect[q.name], 5*time.Second)
			if sent != 3 {
				t.Errorf("%s: %d OPTIONS from the first lost one to Unreachable, want 3 (N)", q.name, sent)
			}
		}
		skew := (detect[ast.name] - detect[qd.name]).Abs()
		t.Logf("detection: patched Asterisk %v, qualifyd %v: %v apart", detect[ast.name], detect[qd.name], skew)
		if skew > detectionSkew {
			t.Errorf("the two detections are %v apart, want at most %v", skew, detectionSkew)
		}
	})

	t.Run("Asterisk's options only, patched as unpatched", func(t *testing.T) {
		for _, q := range []*qualifier{ast, unpatched} {
			q.awaitLine(t, "plain", plain.contact("plain")+" is now Reachable", 2)
		}
		a, u := ast.aorLines("plain"), unpatched.aorLines("plain")
		if !slices.Equal(texts(a), texts(u)) || len(a) != 6 {
			t.Fatalf("plain's lines differ (or are not the 6 of one lost OPTIONS):\npatched:\n%s\nunpatched:\n%s",
				strings.Join(texts(a), "\n"), strings.Join(texts(u), "\n"))
		}
		if a, u := astContactRow(t, patched, "plain"), astContactRow(t, unpatchedAst, "plain"); a != u || a == "" {
			t.Errorf("pjsip show contacts, plain's row:\npatched:   %q\nunpatched: %q", a, u)
		}
		for _, q := range []*qualifier{ast, unpatched} {
			ps := plain.probes(q.src)
			for i := 1; i < len(ps) && i < 5; i++ {
				within(t, fmt.Sprintf("%s: plain's OPTIONS %d->%d", q.name, i, i+1), ps[i].at.Sub(ps[i-1].at), 6*time.Second)
			}
		}
	})

	t.Run("latency only, dead for a minute", func(t *testing.T) {
		for _, q := range []*qualifier{ast, qd} {
			q.awaitLine(t, "lat", "is now Unreachable (latency only, still routable).  RTT: 0.000 msec", 1)
		}
		// Half a minute into the outage the contact still carries calls.
		eventually(t, qualifyBound, "lat's outage half a minute old", func() bool {
			ps := lat.probes(ast.src)
			return len(ps) >= 2 && time.Since(ps[1].at) > 30*time.Second
		})
		if got := dialContacts(t, patched, "lat"); !strings.Contains(got, "PJSIP/lat/"+lat.uri("lat")) {
			t.Errorf("PJSIP_DIAL_CONTACTS(lat) during the outage = %q, want the contact", got)
		}
		out, err := patched.CLI("pjsip show contacts")
		if err != nil || !strings.Contains(out, "Unavail") {
			t.Errorf("pjsip show contacts during lat's outage: %v\n%s", err, out)
		}
		for _, q := range []*qualifier{ast, qd} {
			q.awaitLine(t, "lat", lat.contact("lat")+" is now Reachable", 2)
		}
		a, q := ast.aorLines("lat"), qd.aorLines("lat")
		if !slices.Equal(texts(a), texts(q)) {
			t.Fatalf("lat's lines differ:\npatched Asterisk:\n%s\nqualifyd:\n%s", strings.Join(texts(a), "\n"), strings.Join(texts(q), "\n"))
		}
		ps := lat.probes(ast.src)
		if len(ps) < latLastDrop+1 {
			t.Fatalf("lat got %d OPTIONS, want at least %d", len(ps), latLastDrop+1)
		}
		dead := ps[latLastDrop-1].at.Sub(ps[1].at)
		t.Logf("lat: dead for %v, %d OPTIONS lost", dead, latLastDrop-1)
		if dead < time.Minute {
			t.Errorf("lat's outage lasted %v, want a minute", dead)
		}
		// The down backoff, one contract in both: T + R, T + 2R, T + 4R,
		// then T + F after each lost OPTIONS of the down contact.
		for _, q := range []*qualifier{ast, qd} {
			ps := lat.probes(q.src)
			if len(ps) < 9 {
				t.Fatalf("%s sent lat %d OPTIONS, want at least 9", q.name, len(ps))
			}
			gap := gapOf(ps)
			t.Logf("%s: lat's down OPTIONS 4->5 %v, 5->6 %v, 6->7 %v, 7->8 %v, 8->9 %v",
				q.name, gap(4, 5), gap(5, 6), gap(6, 7), gap(7, 8), gap(8, 9))
			for i, want := range []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second, 7 * time.Second} {
				within(t, fmt.Sprintf("%s: lat's down OPTIONS %d->%d", q.name, i+4, i+5), gap(i+4, i+5), want)
			}
		}
	})
}

// ansiRE is a colour of Asterisk's CLI output.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// rowRTT is the RTT at the end of a "pjsip show contacts" row.
var rowRTT = regexp.MustCompile(`\s+(?:\d+\.\d{3}|nan)$`)

// astContactRow is aor's row of a's "pjsip show contacts", its RTT left out.
func astContactRow(t *testing.T, a *peertest.Asterisk, aor string) string {
	t.Helper()
	out, err := a.CLI("pjsip show contacts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "Contact:  "+aor+"/") {
			return rowRTT.ReplaceAllString(strings.TrimRight(l, " \r"), "")
		}
	}
	return ""
}

// gapOf returns the time from the a-th to the b-th (from 1) of ps.
func gapOf(ps []probeSeen) func(a, b int) time.Duration {
	return func(a, b int) time.Duration { return ps[b-1].at.Sub(ps[a-1].at) }
}

// within fails the test unless got, a gap between two OPTIONS (or two
// lines), is want give or take lateness: either end may be the late one
// (Asterisk sends an AoR's OPTIONS on a grid that started before the
// first of them went out).
func within(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if (got - want).Abs() > lateness {
		t.Errorf("%s: %v, want %v (give or take %v)", what, got, want, lateness)
	}
}

// dialContacts returns PJSIP_DIAL_CONTACTS(endpoint) in a: a Local
// channel runs the qualify-e2e context, which writes it (with an "x"
// after it) to astdb.
func dialContacts(t *testing.T, a *peertest.Asterisk, endpoint string) string {
	t.Helper()
	_, _ = a.CLI("database del e2e " + endpoint)
	if _, err := a.CLI(fmt.Sprintf("channel originate Local/c%s@qualify-e2e application Wait 1", endpoint)); err != nil {
		t.Fatal(err)
	}
	var got string
	eventually(t, qualifyBound, "PJSIP_DIAL_CONTACTS in astdb", func() bool {
		out, err := a.CLI("database get e2e " + endpoint)
		got = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value: "))
		return err == nil && strings.HasSuffix(got, "x")
	})
	return strings.TrimSuffix(got, "x")
}

// regConf is the patched Asterisk's pjsip.conf of the registered phone:
// the AoR reg takes one contact by registration, qualified with the seed
// policy.
const regConf = "[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n" +
	"[reg]\ntype=endpoint\naors=reg\ncontext=qualify-e2e\n\n" +
	"[reg]\ntype=aor\nmax_contacts=1\n" + seedQualify

// TestAsteriskQualifyRegisteredContact registers a phone (SIPp as a UAC)
// to the patched Asterisk, with a Contact that is a relay in front of it,
// as a NAT binding only Asterisk's socket can reach. Once the contact is
// Reachable the relay drops everything: the contact is Unreachable after
// N = 3 failures, each retried R after the previous one ended.
func TestAsteriskQualifyRegisteredContact(t *testing.T) {
	t.Parallel()
	sippAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(freePort(t, "udp")))
	r := newRelay(t, sippAddr)
	a, q := qualifyAsterisk(t, peertest.AsteriskQualifyEnv, "patched Asterisk", regConf)
	dir, _ := filepath.Abs(filepath.Join("testdata", "asterisk"))
	startPeer(t, "sipp", "-sf", filepath.Join(dir, "register.xml"), "-oocsf", filepath.Join(dir, "ooc_options.xml"),
		"-i", "127.0.0.1", "-p", fmt.Sprint(sippAddr.Port()), "-t", "u1", "-m", "1", "-nostdin",
		"-key", "user", "reg", "-key", "contact", r.Addr().String(), fmt.Sprintf("127.0.0.1:%d", a.SIPPort))
	contact := "Contact reg/sip:reg@" + r.Addr().String()
	q.awaitLine(t, "reg", contact+" is now Reachable", 1)
	eventually(t, qualifyBound, "a second answered qualify of the registered contact", func() bool {
		return r.counts().Answered >= 2
	})
	r.setDead(true)
	q.awaitLine(t, "reg", contact+" is now Unreachable", 1)
	got := q.aorLines("reg")
	want := []string{
		"Endpoint reg is now Reachable",
		contact + " is now Reachable.  RTT: R msec",
		contact + " qualify failed (timeout): 1/3 failures, retrying in 1s",
		contact + " qualify failed (timeout): 2/3 failures, retrying in 1s",
		"Endpoint reg is now Unreachable",
		contact + " is now Unreachable.  RTT: 0.000 msec",
	}
	if !slices.Equal(texts(got), want) {
		t.Fatalf("the registered contact's lines:\n%s\nwant:\n%s", strings.Join(texts(got), "\n"), strings.Join(want, "\n"))
	}
	t.Logf("failures at %v, %v; Unreachable at %v", got[2].at.Format("15:04:05.000"), got[3].at.Format("15:04:05.000"), got[5].at.Format("15:04:05.000"))
	within(t, "failure 1 -> 2 (R + T)", got[3].at.Sub(got[2].at), 2*time.Second)
	within(t, "failure 2 -> 3 (R + T)", got[5].at.Sub(got[3].at), 2*time.Second)
	out, err := a.CLI("pjsip show contact reg/sip:reg@" + r.Addr().String())
	if err != nil || !regexp.MustCompile(`Qualify failures\s+: 3\b`).MatchString(out) {
		t.Errorf("pjsip show contact of the registered contact (want its 3 failures): %v\n%s", err, out)
	}
}

// rlConf is the pjsip.conf of the reload test with qualify_failures n; R
// is 4 s, so that a reload fits between two failures.
func rlConf(peer *scriptedPeer, n int) string {
	return "[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n" +
		"[rl]\ntype=endpoint\naors=rl\ncontext=qualify-e2e\n\n" +
		"[rl]\ntype=aor\ncontact=" + peer.uri("rl") + "\nqualify_frequency=6\nqualify_timeout=1\n" +
		fmt.Sprintf("qualify_failures=%d\nqualify_retry_interval=4\n", n)
}

// TestAsteriskQualifyReloadKeepsState changes qualify_failures from 3 to
// 2 with a `core reload` while the contact has one failure counted: the
// next failure is the 2nd of 2, and the contact goes Unreachable without
// being reset.
func TestAsteriskQualifyReloadKeepsState(t *testing.T) {
	t.Parallel()
	peer := newScriptedPeer(t, func(n int) bool { return n >= 2 })
	a, q := qualifyAsterisk(t, peertest.AsteriskQualifyEnv, "patched Asterisk", rlConf(peer, 3))
	c := peer.contact("rl")
	q.awaitLine(t, "rl", c+" qualify failed (timeout): 1/3 failures, retrying in 4s", 1)
	a.Write("pjsip.conf", fmt.Sprintf(rlConf(peer, 2), a.SIPPort))
	if out, err := a.CLI("core reload"); err != nil {
		t.Fatalf("core reload: %v\n%s", err, out)
	}
	q.awaitLine(t, "rl", c+" is now Unreachable", 1)
	want := []string{
		"Endpoint rl is now Reachable",
		c + " is now Reachable.  RTT: R msec",
		c + " qualify failed (timeout): 1/3 failures, retrying in 4s",
		"Endpoint rl is now Unreachable",
		c + " is now Unreachable.  RTT: 0.000 msec",
	}
	if got := texts(q.aorLines("rl")); !slices.Equal(got, want) {
		t.Fatalf("rl's lines across the reload:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(peer.probes(q.src)); n != 3 {
		t.Errorf("%d OPTIONS up to Unreachable, want 3 (one answered, two lost)", n)
	}
	out, err := a.CLI("pjsip show contact rl/" + peer.uri("rl"))
	if err != nil || !regexp.MustCompile(`Qualify failures\s+: 2\b`).MatchString(out) {
		t.Errorf("pjsip show contact after the reload (want 2 failures): %v\n%s", err, out)
	}
	out, err = a.CLI("pjsip show qualify aor rl")
	if err != nil || !regexp.MustCompile(`Qualify failures\s+: 2\b`).MatchString(out) {
		t.Errorf("pjsip show qualify aor after the reload (want qualify_failures 2): %v\n%s", err, out)
	}
	if ev := amiContactStatus(t, a, "rl"); !strings.Contains(ev, "\r\nQualifyFailureCount: 2\r\n") || !strings.Contains(ev, "\r\nStatus: Unreachable\r\n") {
		t.Errorf("ContactStatusDetail of rl's contact (want Unreachable, QualifyFailureCount 2):\n%s", ev)
	}
	out, err = a.CLI("pjsip show aor rl")
	if err != nil || !regexp.MustCompile(`(?m)^\s*qualify_failures\s+: 2$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s*qualify_retry_interval\s+: 4\.0+$`).MatchString(out) {
		t.Errorf("pjsip show aor after the reload (want qualify_failures 2, qualify_retry_interval 4): %v\n%s", err, out)
	}
}

// amiContactStatus returns the ContactStatusDetail event that the
// Manager's PJSIPShowEndpoint gives for endpoint's contact.
func amiContactStatus(t *testing.T, a *peertest.Asterisk, endpoint string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", a.AMIPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "Action: Login\r\nUsername: qualifyd\r\nSecret: %s\r\n\r\n"+
		"Action: PJSIPShowEndpoint\r\nEndpoint: %s\r\n\r\n", peertest.AMISecret, endpoint)
	var ev, msg strings.Builder
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the Manager's answer to PJSIPShowEndpoint: %v\n%s", err, msg.String())
		}
		msg.WriteString(line)
		if line != "\r\n" {
			continue
		}
		m := msg.String()
		msg.Reset()
		switch {
		case strings.Contains(m, "Event: ContactStatusDetail\r\n"):
			ev.WriteString(m)
		case strings.Contains(m, "Event: EndpointDetailComplete\r\n"), strings.Contains(m, "Response: Error\r\n"):
			if ev.Len() == 0 {
				t.Errorf("no ContactStatusDetail for %s:\n%s", endpoint, m)
			}
			return ev.String()
		}
	}
}

// badQualify is each value of the new options both Asterisk and qualifyd
// refuse, naming the option.
var badQualify = [][2]string{
	{"qualify_failures", "0"}, {"qualify_failures", "three"}, {"qualify_successes", "0"},
	{"qualify_retry_interval", "-1"}, {"qualify_retry_interval", "soon"}, {"qualify_retry_interval", "0x10"},
	{"qualify_down_interval", "-0.5"}, {"qualify_down_interval", "inf"},
}

// TestAsteriskQualifyBadValues loads a pjsip.conf with one AoR per bad
// value beside a good one: the patched Asterisk logs an error naming each
// option and loads only the good AoR; qualifyd check-config refuses the
// file with an error naming each section and option.
func TestAsteriskQualifyBadValues(t *testing.T) {
	t.Parallel()
	peer := newScriptedPeer(t, func(int) bool { return false })
	var b strings.Builder
	b.WriteString("[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n")
	b.WriteString("[good]\ntype=aor\ncontact=" + peer.uri("good") + "\n" + seedQualify + "\n")
	for i, kv := range badQualify {
		fmt.Fprintf(&b, "[bad%d]\ntype=aor\ncontact=%s\nqualify_frequency=6\n%s=%s\n\n", i, peer.uri(fmt.Sprint("bad", i)), kv[0], kv[1])
	}
	a, q := qualifyAsterisk(t, peertest.AsteriskQualifyEnv, "patched Asterisk", b.String())
	for _, opt := range []string{"qualify_failures", "qualify_successes", "qualify_retry_interval", "qualify_down_interval", "qualify_latency_only"} {
		out, err := a.CLI("config show help res_pjsip aor " + opt)
		if out = ansiRE.ReplaceAllString(out, ""); err != nil || !strings.Contains(out, "[Synopsis]\n") || strings.Contains(out, "[Synopsis]\nNot available") {
			t.Errorf("config show help res_pjsip aor %s: %v\n%s", opt, err, out)
		}
	}
	out, err := a.CLI("pjsip show aors")
	if err != nil || !strings.Contains(out, "Aor:  good") || strings.Contains(out, "Aor:  bad") {
		t.Fatalf("pjsip show aors (want good only): %v\n%s", err, out)
	}
	var errs []string
	for _, l := range q.lines() {
		if strings.Contains(l.text, "qualify_") {
			errs = append(errs, l.text)
		}
	}
	for _, kv := range badQualify {
		if !slices.ContainsFunc(errs, func(e string) bool {
			return strings.Contains(e, kv[0]) && strings.Contains(e, "'"+kv[1]+"'") || strings.Contains(e, kv[0]+"="+kv[1])
		}) {
			t.Errorf("no error naming %s=%s; Asterisk's errors:\n%s", kv[0], kv[1], strings.Join(errs, "\n"))
		}
	}
	t.Logf("Asterisk's errors:\n%s", strings.Join(errs, "\n"))
	conf := filepath.Join(t.TempDir(), "pjsip.conf")
	writeFile(t, conf, fmt.Sprintf(b.String(), a.SIPPort))
	cc, err := exec.Command(binary, "check-config", conf).CombinedOutput()
	if err == nil {
		t.Fatalf("qualifyd check-config accepted the bad values:\n%s", cc)
	}
	for i, kv := range badQualify {
		if want := fmt.Sprintf("section \"bad%d\": option %q", i, kv[0]); !strings.Contains(string(cc), want) {
			t.Errorf("qualifyd check-config does not say %s:\n%s", want, cc)
		}
	}
}

// Revisions of the patches' Alembic script: Asterisk main's head, which
// it revises, and its own (one for the series, which each patch extends).
const (
	alembicMain = "2285f2ace275"
	alembicHead = "7c4a1f9e2b30"
)

// qualifyColumns are the columns the patches add to ps_aors.
var qualifyColumns = []string{"qualify_down_interval", "qualify_failures", "qualify_latency_only", "qualify_retry_interval", "qualify_successes"}

// TestAsteriskQualifyAlembic applies the patched tree's Alembic scripts
// (build.sh installs them in PREFIX/share/ast-db-manage; alembic writes
// the SQL offline) to a throwaway PostgreSQL: from nothing to the head,
// ps_aors has the five columns; downgraded to main's head, it has none of
// them.
func TestAsteriskQualifyAlembic(t *testing.T) {
	t.Parallel()
	scripts := filepath.Join(os.Getenv(peertest.AsteriskQualifyEnv), "share", "ast-db-manage")
	sample, err := os.ReadFile(filepath.Join(scripts, "config.ini.sample"))
	if err != nil {
		t.Fatalf("no Alembic scripts in the patched build (%s; make deps builds it): %v", peertest.AsteriskQualifyEnv, err)
	}
	ini := regexp.MustCompile(`(?m)^script_location = .*$`).ReplaceAllString(string(sample), "script_location = "+filepath.Join(scripts, "config"))
	ini = regexp.MustCompile(`(?m)^sqlalchemy.url = .*$`).ReplaceAllString(ini, "sqlalchemy.url = postgresql://asterisk@localhost/asterisk")
	conf := filepath.Join(t.TempDir(), "config.ini")
	writeFile(t, conf, ini)
	alembic := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(requirePeer(t, "alembic"), append([]string{"-c", conf}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("alembic %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	p := peertest.StartPostgres(t)
	p.Exec("postgres", "CREATE DATABASE asterisk")
	p.Exec("asterisk", alembic("upgrade", "head", "--sql"))
	if got := aorColumns(t, p); !slices.Equal(got, qualifyColumns) {
		t.Fatalf("ps_aors' qualify columns after the upgrade: %q, want %q", got, qualifyColumns)
	}
	p.Exec("asterisk", alembic("downgrade", alembicHead+":"+alembicMain, "--sql"))
	if got := aorColumns(t, p); len(got) != 0 {
		t.Fatalf("ps_aors' qualify columns after the downgrade: %q, want none", got)
	}
}

// aorColumns returns which of qualifyColumns ps_aors has, sorted.
func aorColumns(t *testing.T, p *peertest.Postgres) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN("postgres", peertest.AdminPassword, "asterisk"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_name = 'ps_aors' AND column_name = ANY($1) ORDER BY column_name", qualifyColumns)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}
