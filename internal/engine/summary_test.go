package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestSummaryFollowsTheTable: the counts Summary keeps up to date as
// probes change statuses and reloads add, change and remove contacts equal
// a count over the whole table, second by second, through flapping peers
// (latency-only among them) and their AoRs' availability, dead ones and
// four reloads.
func TestSummaryFollowsTheTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(uri string, at time.Duration) reply {
			switch {
			case uri[4] == 'd': // dead
				return reply{Silent: true}
			case uri[4] == 'f': // flaps every 20 s
				return reply{Silent: (at/(20*time.Second))%2 == 1, After: time.Millisecond}
			}
			return reply{After: time.Millisecond}
		})
		p := referencePolicy()
		p.Frequency = 5 * time.Second
		lat := p
		lat.LatencyOnly = true
		aors := func(gen int) []AoR {
			var out []AoR
			for i := range 6 {
				pol := p
				if i == 5 {
					pol = lat
				}
				if gen == 2 && i == 1 {
					pol.Failures = 5 // a changed policy renews the AoR's contacts
				}
				a := AoR{Name: fmt.Sprintf("a%d", i), Policy: &pol,
					Contacts: []string{fmt.Sprintf("sip:f%d@h", i), fmt.Sprintf("sip:d%d@h", i)}}
				if gen >= 1 && i%2 == 0 {
					a.Contacts = append(a.Contacts, fmt.Sprintf("sip:l%d-%d@h", i, gen)) // added, then replaced
				}
				if gen >= 3 && i == 3 {
					continue // removed
				}
				out = append(out, a)
			}
			return out
		}
		h.apply(aors(0)...)
		sawUnavailable := false
		for s := 1; s <= 120; s++ {
			if s%30 == 0 {
				h.apply(aors(s / 30)...)
			}
			h.until(time.Duration(s) * time.Second)
			h.e.mu.Lock()
			want := h.e.count()
			h.e.mu.Unlock()
			if got := h.e.Summary(); got != want {
				t.Fatalf("at %ds: Summary %+v, count over the table %+v", s, got, want)
			}
			sawUnavailable = sawUnavailable || want.AoRsAvailable < want.AoRs
		}
		if s := h.e.Summary(); s.AoRs != 5 || !sawUnavailable {
			t.Fatalf("the run never reached what it tests: %+v, an AoR unavailable: %v", s, sawUnavailable)
		}
	})
}

// BenchmarkSummary1M is one metrics scrape's Summary at a million contacts,
// taken under the engine lock that probes need.
func BenchmarkSummary1M(b *testing.B) {
	e, _ := loaded(b, 1_000_000, qualify.DefaultPolicy())
	for b.Loop() {
		_ = e.Summary()
	}
}

// count counts over the whole table, as the kept counts should stand.
// Called with mu held.
func (e *Engine) count() Summary {
	var s Summary
	s.AoRs = len(e.aors)
	for _, a := range e.aors {
		if a.available() {
			s.AoRsAvailable++
		}
		s.Routable += int(a.routable)
		for _, id := range a.ids {
			s.ByStatus[e.slots[id].state.Status]++
		}
	}
	return s
}

// BenchmarkContacts1M is a full listing of a million contacts, as GET
// /api/v1/contacts took it, with lock-wait-s, the longest the stand-in
// scheduler of BenchmarkReload1M waited for the engine's lock meanwhile.
// Run it with -benchtime=3x.
func BenchmarkContacts1M(b *testing.B) {
	e, _ := loaded(b, 1_000_000, qualify.DefaultPolicy())
	b.ReportAllocs()
	stop := watchLock(e)
	for b.Loop() {
		if cs := e.Contacts(); len(cs) != 1_000_000 {
			b.Fatalf("%d contacts", len(cs))
		}
	}
	b.ReportMetric(stop().Seconds(), "lock-wait-s")
}
