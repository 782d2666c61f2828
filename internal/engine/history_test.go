package engine

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestHistogramBins(t *testing.T) {
	// A bin's middle is within 12.5% of every RTT in it, bins grow with
	// the RTT, and the last one takes the RTTs beyond the range.
	prev := 0
	for r := uint32(1); r < 1<<24; r += 1 + r/97 {
		i := bin(r)
		if i < prev {
			t.Fatalf("bin(%d) = %d after bin %d", r, i, prev)
		}
		prev = i
		if m := middle(i); float64(m) > float64(r)*1.125 || float64(m) < float64(r)*0.875 {
			t.Fatalf("bin(%d) = %d, middle %d: off by more than 12.5%%", r, i, m)
		}
	}
	if bin(1<<30) != histBins-1 {
		t.Fatalf("bin(2^30) = %d, want the last", bin(1<<30))
	}
}

func TestBucketMedian(t *testing.T) {
	cases := []struct {
		name string
		rtts []uint32
		want uint32 // within 12.5%
	}{
		{"one", []uint32{1234}, 1234},
		{"odd", []uint32{900, 1000, 50000, 1100, 80000}, 1100},
		{"even: the lower", []uint32{1000, 1000, 20000, 20000}, 1000},
		{"spread", []uint32{100, 200, 400, 800, 1600, 3200, 6400}, 800},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h history
			h.ring = make([]packed, 1)
			h.cur = 0
			for _, r := range c.rtts {
				h.probe(true, time.Duration(r)*time.Microsecond)
			}
			got := h.now.median(&h.rtts)
			if float64(got) > float64(c.want)*1.125 || float64(got) < float64(c.want)*0.875 {
				t.Fatalf("median %d, want %d within 12.5%%", got, c.want)
			}
			if len(c.rtts) == 1 && got != c.want {
				t.Fatalf("median of one RTT %d, want it exactly", got)
			}
		})
	}
}

// downBetween answers in 10 ms, but not from offset down to offset up.
func downBetween(down, up time.Duration) func(string, time.Duration) reply {
	return func(_ string, at time.Duration) reply {
		if at >= down && at < up {
			return reply{Silent: true}
		}
		return reply{After: 10 * time.Millisecond}
	}
}

// TestHistoryBuckets: a trunk answers in 10 ms except from 5 to 10
// minutes. Every bucket's probes, failures and RTTs follow from the
// probes the peer saw (each ends 10 ms after its send, or at the 3 s
// timeout), and its routable time from the AoR's availability events; the
// changes are the contact's status changes.
func TestHistoryBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := referencePolicy()
		h := newHarness(t, Config{}, downBetween(5*time.Minute, 10*time.Minute))
		h.apply(AoR{Name: "trunk", Contacts: []string{"sip:trunk@192.0.2.1"}, Policy: &p})
		h.until(15*time.Minute + 30*time.Second)
		got, ok := h.e.History("trunk")
		if !ok {
			t.Fatal("no history")
		}
		if got.AoR != "trunk" || got.Width != time.Minute || len(got.Buckets) != 16 {
			t.Fatalf("history of %q, width %v, %d buckets; want trunk, 1m, 16", got.AoR, got.Width, len(got.Buckets))
		}
		want := expectedBuckets(h, 16, time.Minute)
		// The outage starts with the probe at 5:00: a timeout every 5 s
		// from 5:03 (3 s timeout, 2 s retry interval), Unreachable at the
		// third, 5:13, then probes at 5:15, 5:22, 5:33 and 5:52 (the down
		// backoff: 2, 4, 8, 16 s after each timeout), the next at 6:25.
		if b := want[5]; b.Routable != 13*time.Second || b.Failures != 7 || b.Probes != 7 {
			t.Fatalf("the derivation's bucket 5 is %+v", b)
		}
		probes, failures := 0, 0
		for _, b := range got.Buckets {
			probes, failures = probes+b.Probes, failures+b.Failures
		}
		a, _ := h.e.AoR("trunk")
		if st := a.Contacts[0].Stats; st.Probes != uint64(probes) || st.Failures != uint64(failures) {
			t.Fatalf("the contact's statistics %+v; the buckets count %d probes, %d failures", st, probes, failures)
		}
		for i := range want {
			if got.Buckets[i] != want[i] {
				t.Errorf("bucket %d: got %+v\nwant %+v", i, got.Buckets[i], want[i])
			}
		}
		var changes []Change
		for _, ev := range h.eventsOf(StatusChanged) {
			changes = append(changes, Change{Time: ev.Time, URI: ev.URI, From: ev.From, To: ev.To, Reason: ev.Reason, Detail: ev.Result.Detail, Code: ev.Result.Code})
		}
		if len(changes) != 3 || !slices.EqualFunc(got.Changes, changes, sameChange) {
			t.Fatalf("changes %+v\nwant the 3 status changes %+v", got.Changes, changes)
		}
		if c := got.Changes[1]; c.To != qualify.Unreachable || c.Reason != qualify.ReasonTimeout || c.Detail != "no response" {
			t.Fatalf("the outage's change is %+v", c)
		}
	})
}

// sameChange reports whether x and y are the same change, at the same
// instant.
func sameChange(x, y Change) bool {
	return x.Time.Equal(y.Time) && x.URI == y.URI && x.From == y.From && x.To == y.To && x.Reason == y.Reason && x.Detail == y.Detail &&
		x.Code == y.Code
}

// expectedBuckets derives n buckets of width from h's record: the probes
// the fake peer saw, ended as its script has them, and the AoR's
// availability events.
func expectedBuckets(h *harness, n int, width time.Duration) []Bucket {
	out := make([]Bucket, n)
	for i := range out {
		out[i].Start = h.t0.Add(time.Duration(i) * width).UTC()
	}
	for _, s := range h.prober.sent {
		r := h.prober.script(s.uri, s.at)
		end, ok := s.at+r.After, !r.Silent
		if r.Silent {
			end = s.at + referencePolicy().Timeout
		}
		i := int(end / width)
		if i >= n || h.t0.Add(end).After(time.Now()) {
			continue // still in flight
		}
		b := &out[i]
		b.Probes++
		if !ok {
			b.Failures++
			continue
		}
		if b.RTTMax == 0 || r.After < b.RTTMin {
			b.RTTMin = r.After
		}
		b.RTTMax, b.RTTP50 = max(b.RTTMax, r.After), r.After // one RTT: exact
	}
	since, up := h.t0, true // NonQualified is routable
	credit := func(until time.Time) {
		for i := range out {
			lo, hi := later(since, out[i].Start), earlier(until, out[i].Start.Add(width))
			if up && hi.After(lo) {
				out[i].Routable += hi.Sub(lo)
			}
		}
	}
	for _, ev := range h.eventsOf(AvailabilityChanged) {
		credit(ev.Time)
		since, up = ev.Time, ev.Available
	}
	credit(time.Now())
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func TestHistoryAlignedToTheWallClock(t *testing.T) {
	// An engine started 20 s into a minute has a first bucket from the
	// minute's start, routable for the 40 s it ran.
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(20 * time.Second)
		p := referencePolicy()
		h := newHarness(t, Config{}, downBetween(time.Hour, time.Hour))
		h.apply(AoR{Name: "trunk", Contacts: []string{"sip:trunk@192.0.2.1"}, Policy: &p})
		h.until(50 * time.Second)
		got, _ := h.e.History("trunk")
		if len(got.Buckets) != 2 {
			t.Fatalf("%d buckets, want 2", len(got.Buckets))
		}
		if b := got.Buckets[0]; b.Start.Second() != 0 || b.Routable != 40*time.Second || b.Probes != 2 {
			t.Fatalf("first bucket %+v: want the minute's start, 40 s routable, 2 probes", b)
		}
		if b := got.Buckets[1]; b.Routable != 10*time.Second {
			t.Fatalf("second bucket %+v: want 10 s routable so far", b)
		}
	})
}

func TestHistoryLengthBound(t *testing.T) {
	// A history keeps HistoryLength of buckets, the newest ending now.
	synctest.Test(t, func(t *testing.T) {
		p := referencePolicy()
		h := newHarness(t, Config{HistoryBucket: 10 * time.Second, HistoryLength: time.Minute}, downBetween(time.Hour, time.Hour))
		h.apply(AoR{Name: "trunk", Contacts: []string{"sip:trunk@192.0.2.1"}, Policy: &p})
		h.until(5*time.Minute + 5*time.Second)
		got, _ := h.e.History("trunk")
		if len(got.Buckets) != 6 || !got.Buckets[5].Start.Equal(h.t0.Add(5*time.Minute)) {
			t.Fatalf("%d buckets, the last at %v; want 6 to %v", len(got.Buckets), got.Buckets[len(got.Buckets)-1].Start, h.t0.Add(5*time.Minute))
		}
		total := 0
		for _, b := range got.Buckets {
			total += b.Probes
		}
		if total != 2 { // at 4:30.01 and 5:00.01
			t.Fatalf("%d probes in the last minute, want 2", total)
		}
	})
}

func TestHistoryAoRsCap(t *testing.T) {
	// The first HistoryAoRs AoRs in configuration order have a history;
	// one removed frees its place for the next without one. A reload that
	// changes an AoR's options keeps its history; removing it drops it.
	synctest.Test(t, func(t *testing.T) {
		p, q := referencePolicy(), referencePolicy()
		q.Frequency = time.Minute
		aor := func(name string, p *qualify.Policy) AoR {
			return AoR{Name: name, Contacts: []string{"sip:" + name + "@192.0.2.1"}, Policy: p}
		}
		h := newHarness(t, Config{HistoryAoRs: 2}, downBetween(time.Hour, time.Hour))
		h.apply(aor("b", &p), aor("a", &p), aor("c", &p))
		h.until(time.Minute)
		if got := h.e.HistoryNames(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("AoRs with a history %v, want [a b]", got)
		}
		if _, ok := h.e.History("c"); ok {
			t.Fatal("c has a history beyond the cap")
		}
		h.apply(aor("b", &q), aor("c", &p))
		h.until(2 * time.Minute)
		if got := h.e.HistoryNames(); !slices.Equal(got, []string{"b", "c"}) {
			t.Fatalf("after removing a: %v, want [b c]", got)
		}
		if b, _ := h.e.History("b"); len(b.Buckets) != 3 || b.Buckets[0].Probes != 2 {
			t.Fatalf("b's history after its options changed: %+v; want it kept from the start", b.Buckets)
		}
		if c, _ := h.e.History("c"); len(c.Buckets) != 2 || !c.Buckets[0].Start.Equal(h.t0.Add(time.Minute)) || c.Buckets[0].Probes != 2 {
			t.Fatalf("c's new history: %+v; want it from the reload at 1 min", c.Buckets)
		}
		h.apply(aor("c", &p))
		h.apply(aor("c", &p), aor("b", &p))
		if b, _ := h.e.History("b"); len(b.Buckets) != 1 || b.Buckets[0].Probes != 0 {
			t.Fatalf("b removed and added again: %+v; want a new history", b.Buckets)
		}
	})
}

func TestHistoryNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := referencePolicy()
		h := newHarness(t, Config{HistoryAoRs: -1}, downBetween(time.Hour, time.Hour))
		h.apply(AoR{Name: "trunk", Contacts: []string{"sip:trunk@192.0.2.1"}, Policy: &p})
		h.until(time.Minute)
		if _, ok := h.e.History("trunk"); ok || h.e.HistoryNames() != nil {
			t.Fatal("a history with HistoryAoRs < 0")
		}
		if _, ok := h.e.History("nope"); ok {
			t.Fatal("a history of an unknown AoR")
		}
	})
}

func TestRestoreHistory(t *testing.T) {
	// A history restored into another engine keeps its buckets where they
	// were on the wall clock and its changes; the time since is empty.
	synctest.Test(t, func(t *testing.T) {
		p := referencePolicy()
		trunk := AoR{Name: "trunk", Contacts: []string{"sip:trunk@192.0.2.1"}, Policy: &p}
		h := newHarness(t, Config{}, downBetween(2*time.Minute, 4*time.Minute))
		h.apply(trunk)
		h.until(6*time.Minute + 30*time.Second)
		saved, _ := h.e.History("trunk")
		h.stop()
		time.Sleep(3 * time.Minute)
		g := newHarness(t, Config{}, downBetween(time.Hour, time.Hour))
		g.apply(trunk)
		if n := g.e.RestoreHistory([]History{saved, {AoR: "gone"}}); n != 1 {
			t.Fatalf("restored %d, want 1", n)
		}
		got, _ := g.e.History("trunk")
		if len(got.Buckets) != 10 || !slices.EqualFunc(got.Changes, saved.Changes, sameChange) {
			t.Fatalf("%d buckets, changes %+v; want 10 and %+v", len(got.Buckets), got.Changes, saved.Changes)
		}
		for i, b := range saved.Buckets {
			if got.Buckets[i] != b {
				t.Errorf("bucket %d: %+v, want %+v", i, got.Buckets[i], b)
			}
		}
		for i := 7; i < 9; i++ {
			if b := got.Buckets[i]; b.Probes != 0 || b.Routable != 0 {
				t.Errorf("bucket %d of the gap: %+v, want empty", i, b)
			}
		}
	})
}

func TestRestoreHistoryOtherWidth(t *testing.T) {
	// Saved minute buckets go to the two-minute buckets holding their
	// starts: counts and routable times add up, the RTT bounds widen and
	// the larger median stands.
	ms := time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	saved := History{AoR: "x", Width: time.Minute, Buckets: []Bucket{
		{Start: t0, Probes: 2, Failures: 1, RTTMin: 10 * ms, RTTP50: 10 * ms, RTTMax: 10 * ms, Routable: time.Minute},
		{Start: t0.Add(time.Minute), Probes: 2, RTTMin: 20 * ms, RTTP50: 30 * ms, RTTMax: 40 * ms, Routable: 30 * time.Second},
		{Start: t0.Add(2 * time.Minute), Probes: 1},
	}}
	h := newHistory(2*time.Minute, time.Hour)
	h.restore(&saved, t0.Add(3*time.Minute).UnixNano(), true)
	var got History
	h.public(&got, "x")
	want := []Bucket{
		{Start: t0, Probes: 4, Failures: 1, RTTMin: 10 * ms, RTTP50: 30 * ms, RTTMax: 40 * ms, Routable: 90 * time.Second},
		{Start: t0.Add(2 * time.Minute), Probes: 1},
	}
	if !slices.Equal(got.Buckets, want) {
		t.Fatalf("got %+v\nwant %+v", got.Buckets, want)
	}
}
