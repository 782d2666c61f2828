package sink

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// blipProber answers every probe in 10 ms, but none sent while blip is
// set (qualifyd's own network failing for every destination at once)
// and none to dead, a destination really down.
type blipProber struct {
	mu   sync.Mutex
	blip bool
	dead string
}

func (p *blipProber) set(on bool) { p.mu.Lock(); p.blip = on; p.mu.Unlock() }

func (p *blipProber) Start(ctx context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	p.mu.Lock()
	silent := p.blip || t.URI == p.dead
	p.mu.Unlock()
	enginetest.Start(ctx, t, enginetest.Reply{Silent: silent, After: 10 * time.Millisecond}, tag, done)
}

// blipRun is what one blip did: when qualifyd panicked, relative to the
// blip's start, and every device state the sink pushed.
type blipRun struct {
	panicAt, calmAt time.Duration // -1: never
	pushes          []string      // "+12.3s trunk4 UNAVAILABLE"
	falseDowns      int           // UNAVAILABLE pushes of a trunk up before the blip
	deadUps         int           // NOT_INUSE pushes of the dead trunk
	maxFailing      int           // trunks failing at once
	settled         time.Duration // from the blip's end to the last push
}

// runBlip runs the real engine and scheduler in virtual time over 10
// trunks to 10 carriers (first probes spread over F, as
// max_initial_qualify_time does), the last one really dead, an AMI sink
// (the strict fake) and the daemon's feed (every status change, first
// failure and cleared run to AoRChanged); all probes fail for blip, from
// 3F after the start (the dead trunk failing for longer than F + T) and
// halfway between two trunks' probes, and the run ends 4F after the
// blip.
func runBlip(t *testing.T, p qualify.Policy, blip time.Duration) blipRun {
	return runBlipOf(t, p, blip, pjsip.Panic{}, true)
}

// runBlipOf is runBlip under the panic rule rule, with the last trunk
// really dead or not.
func runBlipOf(t *testing.T, p qualify.Policy, blip time.Duration, rule pjsip.Panic, withDead bool) blipRun {
	const n = 10
	run := blipRun{panicAt: -1, calmAt: -1}
	synctest.Test(t, func(t *testing.T) {
		prober := &blipProber{}
		before := strings.Repeat(".", n)
		if withDead {
			prober.dead, before = fmt.Sprintf("sip:carrier@192.0.2.%d", 10+n-1), before[1:]+"U"
		}
		phase := 0
		eng, err := engine.New(engine.Config{Prober: prober, MaxInitialQualifyTime: p.Frequency,
			Rand: func() float64 { phase++; return float64(phase-1) / n }})
		if err != nil {
			t.Fatal(err)
		}
		conf := &pjsip.Config{Panic: rule, Sinks: []*pjsip.Sink{amiSink()}}
		for i := range n {
			conf.AoRs = append(conf.AoRs, pjsip.AoR{AoR: probe.AoR{Name: fmt.Sprintf("trunk%d", i),
				Contacts: []string{fmt.Sprintf("sip:carrier@192.0.2.%d", 10+i)}, Policy: &p}})
		}
		if err := eng.ApplyFunc(n, func(i int) *engine.AoR { return &conf.AoRs[i].AoR }); err != nil {
			t.Fatal(err)
		}
		var start time.Time
		var mu sync.Mutex
		f := newFakeManager("s3cret")
		g := NewGroup(Config{Source: eng, Dial: f.dial})
		dead := fmt.Sprintf("DEVICE_STATE(Custom:trunk%d)", n-1)
		f.onSetvar = func(v, val string) {
			mu.Lock()
			defer mu.Unlock()
			if start.IsZero() {
				return
			}
			run.pushes = append(run.pushes, fmt.Sprintf("%+.1fs %s %s", time.Since(start).Seconds(),
				strings.TrimPrefix(strings.TrimSuffix(v, ")"), "DEVICE_STATE(Custom:"), val))
			run.settled = time.Since(start) - blip
			switch {
			case val == "UNAVAILABLE" && (v != dead || !withDead):
				run.falseDowns++
			case val != "UNAVAILABLE" && v == dead && withDead:
				run.deadUps++
			}
		}
		g.Configure(conf)
		sub := eng.Subscribe(1 << 10)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { eng.Run(ctx) })
		wg.Go(func() { g.Run(ctx) })
		wg.Go(func() {
			for ev := range sub.C {
				if ev.Kind == engine.StatusChanged || ev.Kind == engine.ProbeFailed && ev.Failures == 1 || ev.Kind == engine.FailuresCleared {
					g.AoRChanged(ev.AoR)
				}
				mu.Lock()
				active, failing := g.panicNow(), g.Panic().Failing
				run.maxFailing = max(run.maxFailing, failing)
				switch {
				case active && run.panicAt < 0:
					run.panicAt = time.Since(start)
				case !active && run.panicAt >= 0 && run.calmAt < 0:
					run.calmAt = time.Since(start)
				}
				mu.Unlock()
			}
		})
		time.Sleep(3*p.Frequency + p.Frequency/(2*n)) // between two trunks' probes
		if withDead && g.Panic().Recent != 0 {
			t.Errorf("panic %+v at the blip's start: want the dead trunk failing for longer than the wait", g.Panic())
		}
		mu.Lock()
		start = time.Now()
		mu.Unlock()
		prober.set(true)
		time.Sleep(blip)
		prober.set(false)
		time.Sleep(4 * p.Frequency)
		synctest.Wait()
		if got := devices(f, n); got != before {
			t.Errorf("devices %s after the blip, want as before: %s", got, before)
		}
		cancel()
		sub.Close()
		wg.Wait()
	})
	return run
}

// panicNow is the panic's state, for the measurement.
func (g *Group) panicNow() bool { return g.Panic().Active }

// TestPanicInA10TrunkBlip measures the panic's entry and exit when every
// probe of 10 trunks (one really dead) fails for a blip of 15 s and of
// 60 s, with the soak's policy (F=10 s, T=2 s, N=3, R=1 s): what each
// trunk's device was pushed, relative to the blip's start. Run with -v
// for the timelines. It holds the rule: no trunk up before the blip is
// ever pushed down (before, during or after the panic), the dead one is
// never pushed up, and every device is as before once the blip is over.
func TestPanicInA10TrunkBlip(t *testing.T) {
	p := qualify.Policy{Frequency: 10 * time.Second, Timeout: 2 * time.Second, Failures: 3, RetryInterval: time.Second, Successes: 1}
	for _, blip := range []time.Duration{15 * time.Second, 60 * time.Second} {
		r := runBlip(t, p, blip)
		t.Logf("blip %v: panic from %v to %v after its start; at most %d of 10 failing; as before %v after its end:\n  %s",
			blip, r.panicAt, r.calmAt, r.maxFailing, r.settled, strings.Join(r.pushes, "\n  "))
		if r.falseDowns != 0 || r.deadUps != 0 {
			t.Errorf("blip %v: %d downs of trunks up before it, %d ups of the dead one", blip, r.falseDowns, r.deadUps)
		}
		if r.panicAt < 0 || r.calmAt < 0 {
			t.Errorf("blip %v: no panic (%v to %v)", blip, r.panicAt, r.calmAt)
		}
	}
}

// TestPanicBlipWaitsBelowThePanic holds the lower mark's guarantee for
// policies whose detection is fast against F, where the first down of a
// blip comes before the failing share reaches the panic: the README's
// example policy (F=30 s, T=3 s, N=3, R=2 s: (N-1)(R+T) = 10 s against the
// 15 s the share takes to pass half of F), with the dead trunk (failing
// for longer than the wait, it does not count towards the mark) and
// without; and N=1 (the first failed probe is Unreachable) at
// panic_hold_threshold=5, below one trunk's share, for blips of 15 s and
// 60 s. No trunk up before the blip is ever pushed down, the dead one
// never up, and every device is as before after it: a 15 s blip makes no
// panic, its downs wait (above the mark recently failing) until their
// next probe answers within the bound; a 60 s blip panics while they
// wait.
func TestPanicBlipWaitsBelowThePanic(t *testing.T) {
	readme := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second, Successes: 1}
	for _, c := range []struct {
		name string
		p    qualify.Policy
		rule pjsip.Panic
		dead bool
	}{
		{"README policy", readme, pjsip.Panic{}, true},
		{"README policy, none dead", readme, pjsip.Panic{}, false},
		{"N=1", qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 1, Successes: 1}, pjsip.Panic{HoldThreshold: 5}, true},
		{"N=1 R=1s", qualify.Policy{Frequency: 10 * time.Second, Timeout: 2 * time.Second, Failures: 1, RetryInterval: time.Second, Successes: 1}, pjsip.Panic{HoldThreshold: 5}, true},
	} {
		for _, blip := range []time.Duration{15 * time.Second, 60 * time.Second} {
			r := runBlipOf(t, c.p, blip, c.rule, c.dead)
			t.Logf("%s, blip %v: panic from %v to %v; at most %d of 10 failing; pushes %q", c.name, blip, r.panicAt, r.calmAt, r.maxFailing, r.pushes)
			if r.falseDowns != 0 || r.deadUps != 0 {
				t.Errorf("%s, blip %v: %d downs of trunks up before it, %d ups of the dead one; pushes %q", c.name, blip, r.falseDowns, r.deadUps, r.pushes)
			}
			if blip == time.Minute && (r.panicAt < 0 || r.calmAt < 0) {
				t.Errorf("%s, blip %v: no panic (%v to %v)", c.name, blip, r.panicAt, r.calmAt)
			}
		}
	}
}

// TestPanicBlipWaitsFromTheMark holds the limit of the lower mark with
// N=1: the first failed probe of a blip is Unreachable while 1 of 10
// destinations is recently failing, not more than the default 10%, so
// that trunk is pushed down (and taken back when a panic begins: it is
// of the panic's own event), whether a trunk is dead for longer than the
// wait or not (it does not count); with panic_hold_threshold=1 every
// down waits and none is pushed.
func TestPanicBlipWaitsFromTheMark(t *testing.T) {
	p := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 1, Successes: 1}
	for _, c := range []struct {
		hold       int
		falseDowns int
		first      string
	}{{0, 1, "+4.5s trunk1 UNAVAILABLE"}, {1, 0, ""}} {
		for _, dead := range []bool{false, true} {
			for _, blip := range []time.Duration{15 * time.Second, time.Minute} {
				r := runBlipOf(t, p, blip, pjsip.Panic{HoldThreshold: c.hold}, dead)
				t.Logf("panic_hold_threshold %d, dead %v, blip %v: panic from %v to %v; pushes %q", c.hold, dead, blip, r.panicAt, r.calmAt, r.pushes)
				if r.falseDowns != c.falseDowns || c.first != "" && (len(r.pushes) == 0 || r.pushes[0] != c.first) {
					t.Errorf("panic_hold_threshold %d, dead %v, blip %v: %d false downs, pushes %q; want %d, first %q",
						c.hold, dead, blip, r.falseDowns, r.pushes, c.falseDowns, c.first)
				}
			}
		}
	}
}
