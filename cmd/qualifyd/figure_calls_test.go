package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// The figures of calls as evidence (docs/performance.md): a trunk that
// carries a call every 5 s dies (its SIPp is killed: it takes no packet
// any more, as a trunk behind a dead link); how long until each router
// routes around it, with qualifyd hearing the calls' outcomes and
// without, side by side in the same run on the same trunk, qualify_frequency
// F=30, qualify_timeout T=3, qualify_failures N=3, qualify_retry_interval
// R=2. Each trial kills the trunk at a random moment of the probes' cycle,
// waits until both routers have taken it out, and brings it back. Run by
// `make figures-calls` (QUALIFYD_FIGURES=1; QUALIFYD_FIGURE_TRIALS trials
// per router, 3 by default): several minutes, not part of make test.
// QUALIFYD_FIGURE_DEBUG=1 logs the Asterisk qualifyds' lines of the trunk.

const (
	figCall  = 5 * time.Second  // a call every C
	figF     = 30 * time.Second // qualify_frequency
	figBound = 3 * time.Minute  // stops a broken trial; never a result
)

// figQualify is the trunks' qualify options: F=30 T=3 N=3 R=2.
const figQualify = "qualify_frequency=30\nqualify_timeout=3\nqualify_failures=3\nqualify_retry_interval=2\n"

// figGlobal turns the panic and its hold off: one trunk of two failing
// is half the destinations, which the panic would rightly doubt.
const figGlobal = "[global]\ntype=global\npanic_threshold=100\npanic_hold_threshold=100\n\n"

func TestFigureCallsDetection(t *testing.T) {
	if os.Getenv("QUALIFYD_FIGURES") != "1" {
		t.Skip("the calls' figures run under make figures-calls (QUALIFYD_FIGURES=1): several minutes")
	}
	trials := 3
	if n, err := strconv.Atoi(os.Getenv("QUALIFYD_FIGURE_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	t.Run("kamailio fr_timer 2s", func(t *testing.T) { t.Parallel(); figureKamailio(t, trials) })
	t.Run("asterisk timer_b 32s", func(t *testing.T) { t.Parallel(); figureAsterisk(t, trials, "") })
	t.Run("asterisk timer_b 6.4s", func(t *testing.T) {
		t.Parallel()
		figureAsterisk(t, trials, "timer_t1=100\ntimer_b=6400\n")
	})
}

// newMortal starts the figure's trunk (trunk.xml), which runTrials kills
// and starts again on the same port, once it answers OPTIONS.
func newMortal(t *testing.T) *sippTrunk {
	m := newSippTrunk(t, trunkXML, false)
	waitOptions(t, m.addr())
	return m
}

// trial is one death of the trunk: how long each side took to route
// around it.
type trial struct{ with, without time.Duration }

// runTrials kills the trunk trials times, each at a random moment of the
// cycle after both sides route to it (up reports it for one side), and
// measures until down reports it out of routing for each side.
func runTrials(t *testing.T, trunk *sippTrunk, trials int, state func(with bool) (up, down bool)) []trial {
	var out []trial
	for i := range trials {
		eventually(t, figBound, "both sides route to the trunk", func() bool {
			a, _ := state(true)
			b, _ := state(false)
			return a && b
		})
		time.Sleep(rand.N(figF))
		trunk.kill()
		died := time.Now()
		var tr trial
		eventually(t, figBound, "both sides route around the dead trunk", func() bool {
			for _, with := range []bool{true, false} {
				d := &tr.without
				if with {
					d = &tr.with
				}
				if _, down := state(with); down && *d == 0 {
					*d = time.Since(died)
				}
			}
			return tr.with > 0 && tr.without > 0
		})
		t.Logf("trial %d: routed around the dead trunk after %.1f s with the calls' outcomes, %.1f s without",
			i+1, tr.with.Seconds(), tr.without.Seconds())
		out = append(out, tr)
		trunk.start(trunkXML)
		waitOptions(t, trunk.addr())
	}
	return out
}

// summary logs the trials' mean and worst, each side, and their ratio.
func summary(t *testing.T, router string, trials []trial) {
	var w, wo []float64
	for _, tr := range trials {
		w, wo = append(w, tr.with.Seconds()), append(wo, tr.without.Seconds())
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	t.Logf("FIGURE %s: %d trials: with observations mean %.1f s (worst %.1f), without mean %.1f s (worst %.1f): %.2fx",
		router, len(trials), mean(w), slices.Max(w), mean(wo), slices.Max(wo), mean(w)/mean(wo))
}

// figureConf writes a qualifyd configuration of the trunks a (the one
// that dies) and b, with sinks, and returns its path.
func figureConf(t *testing.T, a, b, extra string) string {
	path := filepath.Join(t.TempDir(), "qualifyd.conf")
	writeFile(t, path, fmt.Sprintf("%s[a]\ntype=aor\ncontact=sip:a@%s\n%s\n[b]\ntype=aor\ncontact=sip:b@%s\n%s\n%s",
		figGlobal, a, figQualify, b, figQualify, extra))
	return path
}

// figureKamailio: two Kamailios relay a call every 5 s each over the
// dispatcher set (a, then b) with fr_timer 2 s; one reports the calls'
// outcomes to its qualifyd, the other's qualifyd only probes.
func figureKamailio(t *testing.T, trials int) {
	a, b := newMortal(t), newMortal(t)
	list := filepath.Join(t.TempDir(), "dispatcher.list")
	writeFile(t, list, fmt.Sprintf("1 sip:%s 0 20\n1 sip:%s 0 10\n", a.addr(), b.addr()))
	cfg, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	api := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	kWith := peertest.StartKamailio(t, cfg, list, "FR_TIMER=2000", fmt.Sprintf("OBSERVE_URL=%q", "http://"+api+"/api/v1/observations"))
	kWithout := peertest.StartKamailio(t, cfg, list, "FR_TIMER=2000")
	sink := func(k *peertest.Kamailio) string {
		return fmt.Sprintf("[edge]\ntype=sink\ndriver=kamailio\nurl=%s\n", k.RPC)
	}
	startDaemon(t, "--config", figureConf(t, a.addr(), b.addr(), sink(kWith)), "--http", api, "--sip-bind", "127.0.0.1:0").expect("qualifyd: started")
	startDaemon(t, "--config", figureConf(t, a.addr(), b.addr(), sink(kWithout)), "--http", "", "--sip-bind", "127.0.0.1:0").expect("qualifyd: started")
	sf, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "caller.xml"))
	for _, k := range []*peertest.Kamailio{kWith, kWithout} {
		startPeer(t, "sipp", "-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(freePort(t, "udp")), "-t", "u1",
			"-r", "1", "-rp", strconv.Itoa(int(figCall/time.Millisecond)), "-s", "trunk", "-nostdin",
			"-max_recv_loops", "1000", "-timeout_error", "0", k.SIP)
	}
	ks := map[bool]*kamailio{true: {t: t, rpc: kWith.RPC}, false: {t: t, rpc: kWithout.RPC}}
	dest := "sip:" + a.addr()
	res := runTrials(t, a, trials, func(with bool) (bool, bool) {
		st, err := ks[with].states()
		return err == nil && st[dest] == "A", err == nil && st[dest] == "I"
	})
	summary(t, "kamailio fr_timer 2 s", res)
}

// figureAsterisk: one Asterisk places a call every 5 s to the trunk a
// through its dial plan (Dial with a 60 s timeout, longer than Timer B);
// two qualifyds each keep a device of the trunk (Custom:with-a and
// Custom:without-a), one hearing the calls (observe_calls=yes). system
// is the type=system section's timer lines ("" for Asterisk's defaults).
func figureAsterisk(t *testing.T, trials int, system string) {
	a, b := newMortal(t), newMortal(t)
	ast := peertest.NewAsterisk(t)
	ast.Write("manager.conf", fmt.Sprintf("[general]\nenabled = yes\nport = %d\nbindaddr = 127.0.0.1\n\n"+
		"[qualifyd]\nsecret = %s\nread = call\nwrite = call,system\n", ast.AMIPort, peertest.AMISecret))
	ast.Write("pjsip.conf", fmt.Sprintf("[system]\ntype=system\n%s\n[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n\n"+
		"[a]\ntype=endpoint\naors=a\ncontext=in\ndisallow=all\nallow=ulaw\n\n[a]\ntype=aor\ncontact=sip:a@%s\nqualify_frequency=0\n",
		system, ast.SIPPort, a.addr()))
	ast.Write("extensions.conf", "[out]\nexten => a,1,Dial(PJSIP/a,60)\n[in]\n")
	ast.Start()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ami.secret"), peertest.AMISecret+"\n")
	for _, side := range []string{"with", "without"} {
		sink := fmt.Sprintf("[a]\ntype=endpoint\naors=a\n\n[asterisk]\ntype=sink\ndriver=ami\naddress=127.0.0.1:%d\nusername=qualifyd\n"+
			"secret_file=%s\ndevice_prefix=Custom:%s-\nobserve_calls=%s\n", ast.AMIPort, filepath.Join(dir, "ami.secret"), side,
			map[string]string{"with": "yes", "without": "no"}[side])
		d := startDaemon(t, "--config", figureConf(t, a.addr(), b.addr(), sink), "--http", "", "--sip-bind", "127.0.0.1:0")
		d.expect("qualifyd: started")
		if os.Getenv("QUALIFYD_FIGURE_DEBUG") != "" {
			go func() {
				for l := range d.lines {
					if strings.Contains(l, "a/sip:") || strings.Contains(l, "sink") {
						t.Logf("%s: %s", side, l)
					}
				}
			}()
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(figCall)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, _ = ast.CLI("channel originate Local/a@out application Wait 1")
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	res := runTrials(t, a, trials, func(with bool) (bool, bool) {
		out, err := ast.CLI("database show CustomDevstate")
		if err != nil {
			return false, false
		}
		key := "/CustomDevstate/without-a"
		if with {
			key = "/CustomDevstate/with-a"
		}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
				v = strings.TrimSpace(v)
				return v == "NOT_INUSE", v == "UNAVAILABLE"
			}
		}
		return false, false
	})
	timerB := "32 s"
	if system != "" {
		timerB = "6.4 s (timer_t1=100, timer_b=6400)"
	}
	summary(t, "asterisk timer_b "+timerB, res)
}
