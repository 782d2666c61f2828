package engine

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// trunkDest is trunk's destination, as the routers report it.
const trunkDest = "192.0.2.7:5060"

func call(out observe.Outcome, code int) observe.Observation {
	return observe.Observation{Destination: trunkDest, Outcome: out, Code: code}
}

// callsEvery reports a call towards trunk every c seconds from offset
// first until offset stop: answered while the peer lives (until dead), a
// transaction timeout x later once it is dead, as the router sees them.
// It runs inside the bubble.
func callsEvery(h *harness, first, c, x, dead, stop time.Duration) {
	for at := first; at < stop; at += c {
		if at < dead {
			h.until(at)
			h.e.Observe([]observe.Observation{call(observe.Answered, 200)})
			continue
		}
		h.until(at + x)
		h.e.Observe([]observe.Observation{call(observe.Timeout, 0)})
	}
}

// unreachableAt returns when trunk was made Unreachable, from t0; false
// if it was not.
func unreachableAt(h *harness) (time.Duration, bool) {
	for _, ev := range h.eventsOf(StatusChanged) {
		if ev.URI == trunk && ev.To == qualify.Unreachable {
			return ev.Time.Sub(h.t0), true
		}
	}
	return 0, false
}

// TestCallsShortenDetection: a dead trunk carrying a call every C = 5 s,
// each seen failing X = 2 s after it began (Kamailio's fr_timer), is
// Unreachable within C + X + T + (N-1)(R+T) = 20 s of its death
// (qualify-semantics §11.2), against F + T + (N-1)(R+T) = 43 s with
// probes alone, for deaths at every second of a probe's period.
func TestCallsShortenDetection(t *testing.T) {
	const c, x = 5 * time.Second, 2 * time.Second
	p := referencePolicy()
	bound := c + x + p.Timeout + 2*(p.RetryInterval+p.Timeout)
	for death := 61; death <= 90; death += 1 {
		t.Run(fmt.Sprint(death), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dead := time.Duration(death) * time.Second
				h := newHarness(t, Config{}, answersUntil(dead))
				h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
				callsEvery(h, 1*time.Second, c, x, dead, dead+bound+c)
				at, ok := unreachableAt(h)
				if !ok || at-dead > bound {
					t.Fatalf("died at %v: Unreachable at %v (%v, found %v), want within %v", dead, at, ok, at-dead, bound)
				}
			})
		})
	}
}

// TestFailedCallsBurst: 20 failed calls in 2 s towards a healthy trunk
// (one bad caller) make no change of status, and cost at most one probe
// every R (qualify-semantics §11.2).
func TestFailedCallsBurst(t *testing.T) {
	for _, out := range []observe.Observation{call(observe.Timeout, 0), call(observe.Failed, 503), call(observe.Transport, 0)} {
		t.Run(out.Outcome.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{}, answersUntil(time.Hour))
				h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
				h.until(40 * time.Second) // probed at 0 and 30: Reachable
				for i := range 20 {
					h.until(40*time.Second + time.Duration(i)*100*time.Millisecond)
					if tally := h.e.Observe([]observe.Observation{out}); tally.Accepted != 1 {
						t.Fatalf("call %d: %+v", i, tally)
					}
				}
				h.until(70 * time.Second)
				// The first call brings a probe at 40 s; the next may not
				// come before R = 2 s after it ended; then F.
				if got, want := h.prober.sentTo(trunk), durations(0, 30, 40, 42.01, 72.01); !equalPrefix(got, want) {
					t.Errorf("probes at %v, want %v", got, want[:len(want)-1])
				}
				if evs := h.eventsOf(StatusChanged); len(evs) != 1 || evs[0].To != qualify.Reachable {
					t.Errorf("status changes %+v, want only the first Reachable", evs)
				}
				if c := h.e.Counters(); c.Pulled != 2 {
					t.Errorf("pulled %d probes, want 2", c.Pulled)
				}
			})
		})
	}
}

// equalPrefix reports whether got is want without its last element: the
// last is the first probe that must not have come yet.
func equalPrefix(got, want []time.Duration) bool {
	if len(got) != len(want)-1 {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestQuietTrunk: with qualify_quiet_only, a healthy trunk answering a
// call every 5 s for 10 minutes gets no OPTIONS after its first, and is
// probed again within F of the last call (qualify-semantics §11.3);
// without the option it gets one every F.
func TestQuietTrunk(t *testing.T) {
	for _, quiet := range []bool{true, false} {
		t.Run(fmt.Sprint(quiet), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := referencePolicy()
				p.QuietOnly = quiet
				h := newHarness(t, Config{}, answersUntil(time.Hour))
				h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: &p})
				last := 600 * time.Second
				callsEvery(h, time.Second, 5*time.Second, 0, time.Hour, last+time.Second)
				h.until(last + p.Frequency + time.Second)
				sent := h.prober.sentTo(trunk)
				in := 0
				for _, at := range sent {
					if at > 0 && at <= last {
						in++
					}
				}
				if !quiet {
					if in != 20 {
						t.Errorf("without the option: %d OPTIONS in 10 minutes, want 20", in)
					}
					return
				}
				if in != 0 {
					t.Errorf("%d OPTIONS while calls were answered: %v", in, sent)
				}
				if n := len(sent); n < 2 || sent[n-1] <= last || sent[n-1] > last+p.Frequency {
					t.Errorf("probes at %v: want one within F of the last call at %v", sent, last)
				}
				if c := h.e.Counters(); c.Quiet == 0 {
					t.Error("no skipped probe counted")
				}
			})
		})
	}
}

// TestQuietTrunkStillProbesSuspect: a failed call to a quiet trunk is
// probed at once, and a suspect contact is probed at R though calls are
// answered (qualify-semantics §11.3).
func TestQuietTrunkStillProbesSuspect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := referencePolicy()
		p.QuietOnly = true
		h := newHarness(t, Config{}, answersUntil(20*time.Second))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: &p})
		h.until(10 * time.Second)
		h.e.Observe([]observe.Observation{call(observe.Answered, 0)})
		h.until(25 * time.Second)
		h.e.Observe([]observe.Observation{call(observe.Answered, 0), call(observe.Timeout, 0)})
		h.until(40 * time.Second)
		if got, want := h.prober.sentTo(trunk), durations(0, 25, 30, 35, 40); !slices.Equal(got, want) {
			t.Errorf("probes at %v, want %v", got, want)
		}
		if at, ok := unreachableAt(h); !ok || at != 38*time.Second {
			t.Errorf("Unreachable at %v (%v), want 38s", at, ok)
		}
	})
}

// TestDrainByProbe: a peer answering an OPTIONS 503 with Retry-After: 20
// drains: out of routing for 20 s, no failure counted, no status change,
// probed again at the end and back in routing (qualify-semantics §11.4).
func TestDrainByProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			if at == 30*time.Second {
				return reply{After: 10 * time.Millisecond, Code: 503, RetryAfter: 20 * time.Second}
			}
			return reply{After: 10 * time.Millisecond}
		})
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(31 * time.Second)
		checkDraining(t, h, true)
		h.until(51 * time.Second)
		if got, want := h.prober.sentTo(trunk), durations(0, 30, 50.01); !slices.Equal(got, want) {
			t.Errorf("probes at %v, want %v", got, want)
		}
		checkDraining(t, h, false)
		evs := h.eventsOf(DrainChanged)
		if len(evs) != 2 || !evs[0].Draining || evs[0].Routable || evs[0].Next.Sub(h.t0) != secs(50.01) ||
			evs[1].Draining || !evs[1].Routable || evs[1].Time.Sub(h.t0) != secs(50.02) {
			t.Errorf("drain events %+v", evs)
		}
		if n := len(h.eventsOf(ProbeFailed)) + len(h.eventsOf(StatusChanged)); n != 1 {
			t.Errorf("%d failures or status changes, want only the first Reachable", n)
		}
		if c := h.e.Counters(); c.Probes[qualify.ReasonDraining] != 1 {
			t.Errorf("probes by reason %v, want one draining", c.Probes)
		}
	})
}

// TestDrainEndsWithAFailedProbe: a drain whose first probe after the
// pause goes unanswered ends there, and says so with a DrainChanged of
// its own beside the ProbeFailed that the step publishes first: a cluster
// vote carries the drain and hears of it only by such an event (the
// daemon's feedSinks), and would otherwise hold a healthy trunk out as
// draining once its failures cleared.
func TestDrainEndsWithAFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			switch {
			case at == 30*time.Second:
				return reply{After: 10 * time.Millisecond, Code: 503, RetryAfter: 20 * time.Second}
			case at >= 50*time.Second && at < 51*time.Second:
				return reply{Silent: true}
			}
			return reply{After: 10 * time.Millisecond}
		})
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(31 * time.Second)
		checkDraining(t, h, true)
		h.until(54 * time.Second) // the probe of 50.01 s times out at 53.01 s
		checkDraining(t, h, false)
		evs := h.eventsOf(DrainChanged)
		if len(evs) != 2 || !evs[0].Draining || evs[1].Draining || evs[1].Time.Sub(h.t0) != secs(53.01) {
			t.Errorf("drain events %+v, want its beginning and its end at 53.01 s", evs)
		}
		if evs := h.eventsOf(ProbeFailed); len(evs) != 1 || evs[0].Draining {
			t.Errorf("failures %+v, want the one of 53.01 s, no longer draining", evs)
		}
	})
}

// TestDrainByCall: a call answered 503 with Retry-After: 20 drains the
// contact for 20 s, and a probe in flight meanwhile does not end it.
func TestDrainByCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			return reply{After: 2 * time.Second}
		})
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(31 * time.Second) // the probe of 30 s is in flight until 32 s
		drain := call(observe.Failed, 503)
		drain.RetryAfter = 20 * time.Second
		h.e.Observe([]observe.Observation{drain})
		checkDraining(t, h, true)
		h.until(40 * time.Second)
		checkDraining(t, h, true)
		h.until(54 * time.Second)
		if got, want := h.prober.sentTo(trunk), durations(0, 30, 51); !slices.Equal(got, want) {
			t.Errorf("probes at %v, want %v", got, want)
		}
		checkDraining(t, h, false)
		if s := h.e.Summary(); s.Draining != 0 || s.Routable != 1 {
			t.Errorf("summary %+v", s)
		}
	})
}

// TestDrainReportedLate: a call's 503 with Retry-After: 20 reported 30 s
// after it was answered asks for a pause already over: no drain.
func TestDrainReportedLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(40 * time.Second)
		late := call(observe.Failed, 503)
		late.RetryAfter, late.Time = 20*time.Second, time.Now().Add(-30*time.Second)
		if tally := h.e.Observe([]observe.Observation{late}); tally.Accepted != 1 {
			t.Fatalf("%+v", tally)
		}
		checkDraining(t, h, false)
		if evs := h.eventsOf(DrainChanged); len(evs) != 0 {
			t.Errorf("drain events %+v", evs)
		}
	})
}

// checkDraining checks trunk's phase and routability, and that its AoR
// (of one contact) counts as held out by a drain.
func checkDraining(t *testing.T, h *harness, want bool) {
	t.Helper()
	synctest.Wait()
	a, _ := h.e.AoR("pbx07")
	c := a.Contacts[0]
	sum := h.e.Summary()
	if (c.Phase == qualify.Draining) != want || c.Routable == want || (sum.Draining == 1) != want || (sum.AoRsDrainHeld == 1) != want {
		t.Errorf("at %v: phase %v routable %v; want draining %v", time.Since(h.t0), c.Phase, c.Routable, want)
	}
}

// TestObserveDrops: unknown, stale and malformed observations are
// dropped and counted; an AoR name and a contact URI match too.
func TestObserveDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())},
			AoR{Name: "off", Contacts: []string{"sip:192.0.2.9"}, Policy: &qualify.Policy{}})
		h.until(time.Second)
		now := time.Now()
		tally := h.e.Observe([]observe.Observation{
			{Destination: "192.0.2.8:5060", Outcome: observe.Answered},
			{Destination: "192.0.2.9:5060", Outcome: observe.Answered}, // qualify off
			{AoR: "pbx07", Outcome: observe.Answered, Source: observe.SourceAMI},
			{Destination: "sip:192.0.2.7", Outcome: observe.Answered, Source: observe.SourceAMI},
			{AoR: "pbx07", Contact: trunk, Outcome: observe.Timeout, Source: observe.SourceKamailio},
			{AoR: "pbx07", Contact: "sip:other", Outcome: observe.Answered},
			{AoR: "nope", Outcome: observe.Answered},
			{Destination: trunkDest, Outcome: observe.Answered, Time: now.Add(-observe.MaxAge - time.Second)},
			{Destination: trunkDest, Outcome: observe.Failed},
		})
		var want observe.Tally
		want.Accepted = 3
		want.BySource[observe.SourceAMI][observe.Answered] = 2
		want.BySource[observe.SourceKamailio][observe.Timeout] = 1
		want.Dropped[observe.DropUnknown] = 4
		want.Dropped[observe.DropStale] = 1
		want.Dropped[observe.DropMalformed] = 1
		if tally != want {
			t.Errorf("tally %+v, want %+v", tally, want)
		}
	})
}

// TestFailedCallWithoutRetryInterval: an AoR without
// qualify_retry_interval (Asterisk's F = 60 s, N = 1) has a failed call's
// probe brought forward too, no sooner than T after its last probe
// (qualify-semantics §11.2): a dead trunk carrying calls is found within
// C + X + T, not F + T.
func TestFailedCallWithoutRetryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := qualify.Policy{Frequency: 60 * time.Second, Timeout: 3 * time.Second, Failures: 1}
		h := newHarness(t, Config{}, answersUntil(time.Second))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: &p})
		h.until(time.Second) // Reachable since 0.01 s
		h.e.Observe([]observe.Observation{call(observe.Timeout, 0)})
		h.until(2 * time.Second)
		h.e.Observe([]observe.Observation{call(observe.Timeout, 0)}) // a probe is already due at 3.01 s
		h.until(10 * time.Second)
		if got, want := h.prober.sentTo(trunk), durations(0, 3.01); !slices.Equal(got, want) {
			t.Errorf("probes at %v, want %v", got, want)
		}
		if at, ok := unreachableAt(h); !ok || at != secs(6.01) {
			t.Errorf("Unreachable at %v (%v), want 6.01s", at, ok)
		}
	})
}

// BenchmarkObserve is one observation by destination applied to an
// engine of 1000 AoRs with a day's history each, in batches of 256
// (the API's largest): answered calls (a stamp), failed ones (the
// probe brought forward, at most one pending), against BenchmarkProbe's
// cost of a probe in the same run.
func BenchmarkObserve(b *testing.B) {
	for _, out := range []observe.Outcome{observe.Answered, observe.Timeout} {
		b.Run(out.String(), func(b *testing.B) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			e, err := New(Config{Prober: instant{}, Now: func() time.Time { return now }})
			if err != nil {
				b.Fatal(err)
			}
			p := referencePolicy()
			aors := make([]AoR, 1000)
			batch := make([]observe.Observation, 256)
			for i := range aors {
				u := "sip:c" + strconv.Itoa(i) + "@192.0.2." + strconv.Itoa(i%250+1) + ":" + strconv.Itoa(5060+i)
				aors[i] = AoR{Name: u[4:], Contacts: []string{u}, Policy: &p}
			}
			for i := range batch {
				batch[i] = observe.Observation{Destination: "192.0.2." + strconv.Itoa(i%250+1) + ":" + strconv.Itoa(5060+i), Outcome: out}
			}
			if err := e.Apply(aors); err != nil {
				b.Fatal(err)
			}
			e.Observe(batch[:1]) // the index of destinations
			b.ReportAllocs()
			for b.Loop() {
				if t := e.Observe(batch); t.Accepted != len(batch) {
					b.Fatalf("%+v", t)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/observation")
		})
	}
}
