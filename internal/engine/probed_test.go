package engine

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

const other = "sip:pbx08@192.0.2.8:5060"

// not returns the Probed test that takes uri off probing.
func not(uri string) Probed { return func(_, u string) bool { return u != uri } }

// contactOf returns the snapshot of the contact uri of the AoR pbx.
func contactOf(t *testing.T, e *Engine, uri string) ContactSnapshot {
	t.Helper()
	a, _ := e.AoR("pbx")
	for _, c := range a.Contacts {
		if c.URI == uri {
			return c
		}
	}
	t.Fatalf("no contact %s in %+v", uri, a)
	return ContactSnapshot{}
}

// TestSetProbedTakesOffAndPutsBack: a contact taken off probing is
// probed no more and goes NonQualified with its event; put back, it has a
// new contact's first probe (a random fraction of F, not a full F); the
// contact that stays keeps its state and schedule throughout.
func TestSetProbedTakesOffAndPutsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Rand: func() float64 { return 0.5 }}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx", Contacts: []string{trunk, other}, Policy: new(referencePolicy())})
		h.until(20 * time.Second) // both probed at 15 (0.5 x F), Reachable
		var moved []string
		before := func(aor, uri string, here bool) {
			moved = append(moved, fmt.Sprintln(aor, uri, here))
			if c := contactOf(t, h.e, uri); c.Elsewhere || c.Status != qualify.Reachable {
				t.Errorf("moved told after the move: %+v", c) // the daemon withdraws the vote before it
			}
		}
		if n := h.e.SetProbed(not(other), before); n != 1 {
			t.Fatalf("SetProbed says %d contacts probed here, want 1", n)
		}
		if want := []string{"pbx " + other + " false\n"}; !slices.Equal(moved, want) {
			t.Fatalf("moved %q, want %q", moved, want)
		}
		synctest.Wait()
		c := contactOf(t, h.e, other)
		if c.Status != qualify.NonQualified || !c.Elsewhere || !c.NextProbe.IsZero() || c.Failures != 0 {
			t.Fatalf("taken off: %+v", c)
		}
		if s := h.e.Summary(); s.Elsewhere != 1 || s.ByStatus[qualify.Reachable] != 1 || s.ByStatus[qualify.NonQualified] != 1 {
			t.Fatalf("summary %+v", s)
		}
		h.until(40 * time.Second)
		h.e.SetProbed(nil, nil)
		h.until(80 * time.Second)
		if got, want := h.prober.sentTo(other), durations(15, 55); !slices.Equal(got, want) {
			t.Fatalf("probes of the contact taken off at 20 s and back at 40 s: %v, want %v", got, want)
		}
		if got, want := h.prober.sentTo(trunk), durations(15, 45, 75); !slices.Equal(got, want) {
			t.Fatalf("probes of the contact that stays: %v, want %v", got, want)
		}
		checkEdges(t, h, []edge{
			{StatusChanged, 15.01, qualify.NonQualified, qualify.Reachable, 0, 45},
			{StatusChanged, 15.01, qualify.NonQualified, qualify.Reachable, 0, 45},
			{StatusChanged, 20, qualify.Reachable, qualify.NonQualified, 0, 0},
			{StatusChanged, 55.01, qualify.NonQualified, qualify.Reachable, 0, 85},
		})
		if ev := h.eventsOf(StatusChanged)[2]; ev.URI != other || !ev.Routable {
			t.Fatalf("take-off event %+v", ev)
		}
	})
}

// TestSetProbedInFlight: a probe in flight when its contact is taken off
// is not applied, and the contact is left with nothing scheduled or in
// flight.
func TestSetProbedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(string, time.Duration) reply { return reply{After: 2 * time.Second} })
		h.apply(AoR{Name: "pbx", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(time.Second)
		h.e.SetProbed(not(trunk), nil)
		h.until(100 * time.Second)
		if got := h.prober.sentTo(trunk); !slices.Equal(got, durations(0)) {
			t.Fatalf("probes %v, want only the one at 0", got)
		}
		if c := contactOf(t, h.e, trunk); c.Status != qualify.NonQualified || c.InFlight || !c.NextProbe.IsZero() || c.Stats.Probes != 0 {
			t.Fatalf("after the unapplied probe: %+v", c)
		}
		if evs := h.eventsOf(StatusChanged); len(evs) != 0 {
			t.Fatalf("events %+v, want none", evs)
		}
	})
}

// TestSetProbedManualQualify: a manual qualify does not probe a contact
// probed elsewhere and says so; it probes the others.
func TestSetProbedManualQualify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx", Contacts: []string{trunk, other}, Policy: new(referencePolicy())})
		h.e.SetProbed(not(other), nil)
		h.until(10 * time.Second)
		rs, err := h.e.Qualify(t.Context(), "pbx")
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 || rs[0].Err != nil || !rs[0].OK || !errors.Is(rs[1].Err, ErrElsewhere) {
			t.Fatalf("manual qualify %+v", rs)
		}
		if got := h.prober.sentTo(other); len(got) != 0 {
			t.Fatalf("probes of the contact probed elsewhere: %v", got)
		}
	})
}

// TestApplyProbedElsewhere: Apply gives each new or renewed contact the
// Probed test's answer; a kept contact keeps its own, and the counts
// follow.
func TestApplyProbedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		h.e.SetProbed(not(other), nil)
		h.apply(AoR{Name: "pbx", Contacts: []string{trunk, other}, Policy: new(referencePolicy())})
		h.until(10 * time.Second)
		if got := h.prober.sentTo(other); len(got) != 0 {
			t.Fatalf("new contact probed elsewhere was probed at %v", got)
		}
		slower := referencePolicy()
		slower.Frequency = 60 * time.Second
		h.apply(AoR{Name: "pbx", Contacts: []string{trunk, other}, Policy: &slower}) // both renewed
		h.until(100 * time.Second)
		if got := h.prober.sentTo(other); len(got) != 0 {
			t.Fatalf("renewed contact probed elsewhere was probed at %v", got)
		}
		if got, want := h.prober.sentTo(trunk), durations(0, 10, 70); !slices.Equal(got, want) {
			t.Fatalf("probes of the contact probed here %v, want %v", got, want)
		}
		if c := contactOf(t, h.e, other); !c.Elsewhere || c.Status != qualify.NonQualified || !c.NextProbe.IsZero() {
			t.Fatalf("renewed contact probed elsewhere: %+v", c)
		}
		if s := h.e.Summary(); s.Elsewhere != 1 {
			t.Fatalf("summary %+v, want 1 elsewhere", s)
		}
	})
}

// TestRestoreSkipsProbedElsewhere: a saved state of a contact another
// node probes is not restored: the contact stays NonQualified.
func TestRestoreSkipsProbedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := New(Config{Prober: &fakeProber{script: answersUntil(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		p := referencePolicy()
		e.SetProbed(not(other), nil)
		if err := e.Apply([]AoR{{Name: "pbx", Contacts: []string{trunk, other}, Policy: &p}}); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		saved := func(uri string) Saved {
			return Saved{AoR: "pbx", URI: uri, State: qualify.State{Status: qualify.Unreachable}, Last: LastResult{At: now, Reason: qualify.ReasonTimeout},
				Policy: &p, Probe: new(probe.Options)}
		}
		r := e.Restore([]Saved{saved(trunk), saved(other)}, nil)
		if r.Restored != 1 || r.Stale != 1 {
			t.Fatalf("restored %+v, want 1 restored and 1 left out", r)
		}
		if c := contactOf(t, e, other); c.Status != qualify.NonQualified {
			t.Fatalf("contact probed elsewhere restored as %v", c.Status)
		}
		if c := contactOf(t, e, trunk); c.Status != qualify.Unreachable {
			t.Fatalf("contact probed here restored as %v, want Unreachable", c.Status)
		}
	})
}

// BenchmarkMembershipChange100k is what a node of 100,000 contacts does
// when a third of them move to it and back (a node of three leaving and
// rejoining, vantages=2), against a reload of the same unchanged set
// (reload; reload-single without a Probed test, as a single node), each
// with the longest wait for the engine's lock meanwhile (lock-wait-s).
func BenchmarkMembershipChange100k(b *testing.B) {
	third := func(_, uri string) bool { return crc32.ChecksumIEEE([]byte(uri))%3 != 0 }
	for _, probed := range []struct {
		name string
		test Probed
	}{{"reload-single", nil}, {"reload", third}} {
		b.Run(probed.name, func(b *testing.B) {
			e, aors := loaded(b, 100_000, referencePolicy())
			e.SetProbed(probed.test, nil)
			stop := watchLock(e)
			for b.Loop() {
				if err := e.Apply(aors); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(stop().Seconds(), "lock-wait-s")
		})
	}
	b.Run("move-third", func(b *testing.B) {
		e, _ := loaded(b, 100_000, referencePolicy())
		e.SetProbed(third, nil)
		stop := watchLock(e)
		i := 0
		for b.Loop() {
			if i++; i%2 == 1 {
				e.SetProbed(nil, nil)
			} else {
				e.SetProbed(third, nil)
			}
		}
		b.ReportMetric(stop().Seconds(), "lock-wait-s")
	})
}
