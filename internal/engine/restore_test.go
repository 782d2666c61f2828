package engine

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// down is a saved state of trunk, Unreachable after the reference
// policy's N failures, its last result (a timeout) taken ago before now.
func down(now time.Time, ago time.Duration) Saved {
	return Saved{AoR: "pbx07", URI: trunk, Policy: new(referencePolicy()), Probe: &probe.Options{},
		State: qualify.State{Status: qualify.Unreachable, Failures: 3},
		Last:  LastResult{At: now.Add(-ago), Reason: qualify.ReasonTimeout, Detail: "no response"}, RTT: 12 * time.Millisecond}
}

// TestRestoreUnreachableAtOnce: a restored Unreachable contact is
// Unreachable and unroutable as Restore returns, its AoR unavailable, and
// subscribers get the status change and the availability, with the saved
// reason; its next probe stays the first probe Apply spread (0.5 F here),
// and that probe continues from the restored state (qualify-semantics §8,
// §7: one success of M=1 makes it Reachable).
func TestRestoreUnreachableAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Rand: func() float64 { return 0.5 }}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		got := h.e.Restore([]Saved{down(h.t0, 20*time.Second)}, nil)
		if got != (Restored{Restored: 1}) {
			t.Fatalf("Restore = %+v", got)
		}
		a, _ := h.e.AoR("pbx07")
		c := a.Contacts[0]
		if a.Available || c.Status != qualify.Unreachable || c.Routable || c.Phase != qualify.Down || c.Failures != 3 ||
			c.Last.Reason != qualify.ReasonTimeout || !c.Last.At.Equal(h.t0.Add(-20*time.Second)) || c.RTT != 12*time.Millisecond {
			t.Fatalf("restored AoR %+v", a)
		}
		if next := c.NextProbe.Sub(h.t0); next != 15*time.Second {
			t.Fatalf("next probe at %v, want the first probe's 15s", next)
		}
		if s := h.e.Summary(); s.ByStatus[qualify.Unreachable] != 1 || s.Routable != 0 || s.AoRsAvailable != 0 {
			t.Fatalf("summary %+v", s)
		}
		checkEdges(t, h, []edge{
			{StatusChanged, 0, qualify.NonQualified, qualify.Unreachable, 3, 15},
			{AvailabilityChanged, 0, 0, 0, 0, 0},
		})
		if ev := h.eventsOf(StatusChanged)[0]; ev.Routable || ev.Reason != qualify.ReasonTimeout || ev.Result.Detail != "no response" {
			t.Fatalf("restore event %+v", ev)
		}
		h.until(16 * time.Second)
		if got := h.prober.sentTo(trunk); len(got) != 1 || got[0] != 15*time.Second {
			t.Fatalf("probes sent at %v, want one at 15s", got)
		}
		if a, _ := h.e.AoR("pbx07"); a.Contacts[0].Status != qualify.Reachable {
			t.Fatalf("after its first probe: %+v", a.Contacts[0])
		}
	})
}

// TestRestoreRule: only a contact whose AoR, URI and options are
// unchanged takes its saved state (the reload rule, qualify-semantics §8);
// a state older than 10 F (from its result, or from Held when later), of
// a qualify-off AoR or without a result is not restored, nor one of a
// contact this engine already probed.
func TestRestoreRule(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		edit func(s *Saved)
		want Restored
	}{
		{"unchanged", func(*Saved) {}, Restored{Restored: 1}},
		{"AoR gone", func(s *Saved) { s.AoR = "pbx08" }, Restored{Changed: 1}},
		{"URI changed", func(s *Saved) { s.URI = "sip:pbx07@192.0.2.7:5061" }, Restored{Changed: 1}},
		{"policy changed", func(s *Saved) { s.Policy = &qualify.Policy{Frequency: 30 * time.Second, Failures: 2} }, Restored{Changed: 1}},
		{"probe options changed", func(s *Saved) { s.Probe = &probe.Options{Transport: "tcp"} }, Restored{Changed: 1}},
		{"no options", func(s *Saved) { s.Policy = nil }, Restored{Changed: 1}},
		{"10 F old", func(s *Saved) { s.Last.At = now.Add(-300 * time.Second) }, Restored{Restored: 1}},
		{"older than 10 F", func(s *Saved) { s.Last.At = now.Add(-301 * time.Second) }, Restored{Stale: 1}},
		{"older than 10 F, held since", func(s *Saved) { s.Last.At, s.Held = now.Add(-time.Hour), now.Add(-300*time.Second) }, Restored{Restored: 1}},
		{"held longer ago than 10 F", func(s *Saved) { s.Last.At, s.Held = now.Add(-time.Hour), now.Add(-301*time.Second) }, Restored{Stale: 1}},
		{"held before its result", func(s *Saved) { s.Last.At, s.Held = now.Add(-time.Second), now.Add(-time.Hour) }, Restored{Restored: 1}},
		{"no result", func(s *Saved) { s.Last = LastResult{} }, Restored{Stale: 1}},
		{"no result, held", func(s *Saved) { s.Last, s.Held = LastResult{}, now }, Restored{Stale: 1}},
		{"impossible status", func(s *Saved) { s.State.Status = qualify.Removed }, Restored{Stale: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := idleAt(t, now, AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
			s := down(now, time.Second)
			tt.edit(&s)
			if got := e.Restore([]Saved{s}, nil); got != tt.want {
				t.Fatalf("Restore = %+v, want %+v", got, tt.want)
			}
			want := qualify.NonQualified
			if tt.want.Restored == 1 {
				want = qualify.Unreachable
			}
			if a, _ := e.AoR("pbx07"); a.Contacts[0].Status != want {
				t.Fatalf("status %v, want %v", a.Contacts[0].Status, want)
			}
		})
	}
}

// idleAt returns an engine, not running, whose clock stands at now, that
// has applied aors.
func idleAt(t *testing.T, now time.Time, aors ...AoR) *Engine {
	t.Helper()
	e, err := New(Config{Prober: &fakeProber{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRestoreQualifyOff: a qualify-off contact restores nothing, even a
// state saved when its AoR had the same (off) options.
func TestRestoreQualifyOff(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	off := &qualify.Policy{Timeout: 3 * time.Second}
	e := idleAt(t, now, AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: off})
	s := down(now, time.Second)
	s.Policy = off
	if got := e.Restore([]Saved{s}, nil); got != (Restored{Stale: 1}) {
		t.Fatalf("Restore = %+v", got)
	}
}

// TestRestoreKeepsCounters: a suspect contact keeps its failures, a
// recovering one its successes, and each its phase; a status that stays
// NonQualified publishes nothing.
func TestRestoreKeepsCounters(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := referencePolicy()
	p.Successes = 2
	uris := []string{"sip:a@h", "sip:b@h", "sip:c@h"}
	e := idleAt(t, now, AoR{Name: "pbx07", Contacts: uris, Policy: &p})
	sub := e.Subscribe(16)
	states := []qualify.State{
		{Status: qualify.Reachable, Failures: 2},
		{Status: qualify.Unreachable, Failures: 3, Successes: 1},
		{Status: qualify.NonQualified, Failures: 1},
	}
	var saved []Saved
	for i, st := range states {
		saved = append(saved, Saved{AoR: "pbx07", URI: uris[i], Policy: &p, Probe: &probe.Options{}, State: st,
			Last: LastResult{At: now.Add(-time.Second), OK: st.Successes > 0, Code: 200}, RTT: time.Millisecond})
	}
	if got := e.Restore(saved, nil); got != (Restored{Restored: 3}) {
		t.Fatalf("Restore = %+v", got)
	}
	a, _ := e.AoR("pbx07")
	phases := []qualify.Phase{qualify.Suspect, qualify.Recovering, qualify.Suspect}
	for i, c := range a.Contacts {
		if got := (qualify.State{Status: c.Status, Failures: uint32(c.Failures), Successes: uint32(c.Successes)}); got != states[i] || c.Phase != phases[i] {
			t.Errorf("%s: %+v (%v), want %+v (%v)", c.URI, got, c.Phase, states[i], phases[i])
		}
	}
	sub.Close()
	var kinds []EventKind
	for ev := range sub.C {
		kinds = append(kinds, ev.Kind)
	}
	if len(kinds) != 2 || kinds[0] != StatusChanged || kinds[1] != StatusChanged {
		t.Fatalf("events %v, want two status changes", kinds)
	}
}

// TestRestoreLeavesProbedContacts: a contact that already has a result
// of this engine keeps it; its state is newer than any saved one.
func TestRestoreLeavesProbedContacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(time.Second)
		if got := h.e.Restore([]Saved{down(time.Now(), time.Second)}, nil); got != (Restored{Probed: 1}) {
			t.Fatalf("Restore = %+v", got)
		}
		if a, _ := h.e.AoR("pbx07"); a.Contacts[0].Status != qualify.Reachable {
			t.Fatalf("status %v", a.Contacts[0].Status)
		}
	})
}

// TestRestoreSealsOptions: seal maps the AoRs' own options before the
// comparison, so a saved state that keeps a password's digest matches
// the AoR that has the password, and not one whose password changed.
func TestRestoreSealsOptions(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	seal := func(o probe.Options) probe.Options {
		o.Auth.Password = "digest of " + o.Auth.Password
		return o
	}
	for _, tt := range []struct {
		password string
		want     Restored
	}{{"secret", Restored{Restored: 1}}, {"changed", Restored{Changed: 1}}} {
		live := &probe.Options{Auth: probe.Credentials{Username: "u", Password: tt.password}}
		e := idleAt(t, now, AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy()), Probe: live})
		s := down(now, time.Second)
		s.Probe = &probe.Options{Auth: probe.Credentials{Username: "u", Password: "digest of secret"}}
		if got := e.Restore([]Saved{s}, seal); got != tt.want {
			t.Errorf("password %q: Restore = %+v, want %+v", tt.password, got, tt.want)
		}
	}
}

// TestSavedPageRoundTrip: what SavedPage takes from a running engine,
// restored into a new engine with the same AoRs, gives the same contacts
// back, page after page.
func TestSavedPageRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(40*time.Second))
		aors := pagedSet()
		h.apply(aors...)
		h.until(120 * time.Second)
		var saved, page []Saved
		for after, more := "", true; more; {
			page, more = h.e.SavedPage(page, after, 5)
			saved = append(saved, page...)
			if more {
				after = page[len(page)-1].AoR
			}
		}
		if want := len(inOrder(aors)); len(saved) != want {
			t.Fatalf("saved %d contacts, want %d", len(saved), want)
		}
		e2 := idleAt(t, time.Now(), aors...)
		if got := e2.Restore(saved, nil); got.Restored != len(saved) {
			t.Fatalf("Restore = %+v", got)
		}
		was, now := h.e.Contacts(), e2.Contacts()
		for i := range was {
			w, g := was[i], now[i]
			if w.AoR != g.AoR || w.URI != g.URI || w.Status != g.Status || w.Failures != g.Failures ||
				w.Successes != g.Successes || w.RTT != g.RTT || w.Last != g.Last || w.Routable != g.Routable {
				t.Fatalf("contact %d restored as %+v, was %+v", i, g, w)
			}
		}
		if was[0].Status != qualify.Unreachable {
			t.Fatalf("the run never reached what it tests: %+v", was[0])
		}
	})
}

// TestSeqContinues: an engine numbers its events from Config.Seq+1, and a
// subscription says where it starts.
func TestSeqContinues(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	e, err := New(Config{Prober: &fakeProber{}, Now: func() time.Time { return now }, Seq: 41})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply([]AoR{{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())}}); err != nil {
		t.Fatal(err)
	}
	sub := e.Subscribe(4)
	if sub.Seq != 41 || e.Seq() != 41 {
		t.Fatalf("before any event: subscription %d, engine %d", sub.Seq, e.Seq())
	}
	e.Restore([]Saved{down(now, time.Second)}, nil)
	if ev := <-sub.C; ev.Seq != 42 || e.Seq() != 43 {
		t.Fatalf("first event %d, last %d; want 42 and 43", ev.Seq, e.Seq())
	}
	if got, want := StartSeq(now), uint64(now.UnixMicro()); got != want || got >= 1<<53 {
		t.Fatalf("StartSeq = %d, want %d (< 2^53)", got, want)
	}
}

// TestDurable: Durable moves with a contact's first verdict, a failure
// counted towards N and the reset of its failures by a success (which
// publishes one FailuresCleared), and not with the successes of a healthy contact,
// each a new last result.
func TestDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			if at >= 60*time.Second && at < 61*time.Second {
				return reply{Silent: true}
			}
			return reply{After: 10 * time.Millisecond}
		})
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(5 * time.Second)
		first, probes := h.e.Durable(), h.e.Counters().Probes[qualify.ReasonNone]
		if first == 0 {
			t.Fatal("the first verdict did not move Durable")
		}
		h.until(50 * time.Second)
		if d, p := h.e.Durable(), h.e.Counters().Probes[qualify.ReasonNone]; d != first || p == probes {
			t.Fatalf("healthy probes (%d then %d) moved Durable from %d to %d", probes, p, first, d)
		}
		h.until(64 * time.Second)
		failed, seq := h.e.Durable(), h.e.Seq()
		if failed == first {
			t.Fatal("a failure counted towards N did not move Durable")
		}
		h.until(80 * time.Second)
		a, _ := h.e.AoR("pbx07")
		if c := a.Contacts[0]; c.Status != qualify.Reachable || c.Failures != 0 || h.e.Seq() != seq+1 {
			t.Fatalf("after the retry: %+v, events %d -> %d", c, seq, h.e.Seq())
		}
		if h.e.Durable() == failed {
			t.Fatal("the reset of the failures did not move Durable")
		}
	})
}
