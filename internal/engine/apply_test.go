package engine

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
	"weak"

	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestReloadKeepsUnchangedContacts: an unchanged contact keeps its status
// and schedule across a reload (qualify-semantics §8).
func TestReloadKeepsUnchangedContacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		p := referencePolicy()
		h.apply(AoR{Name: "a", Contacts: []string{"sip:x@h", "sip:y@h"}, Policy: &p})
		h.until(40 * time.Second)
		before := h.e.Contacts()[0]
		h.apply(AoR{Name: "a", Contacts: []string{"sip:x@h", "sip:z@h"}, Policy: &p})
		h.until(41 * time.Second)
		after := h.e.Contacts()
		if len(after) != 2 || after[0].URI != "sip:x@h" || after[1].URI != "sip:z@h" {
			t.Fatalf("contacts after reload: %+v", after)
		}
		if !reflect.DeepEqual(after[0], before) {
			t.Fatalf("unchanged contact changed:\n%+v\n%+v", before, after[0])
		}
		if got := h.prober.sentTo("sip:x@h"); !slices.Equal(got, durations(0, 30)) {
			t.Fatalf("kept contact probed at %v, want its own schedule 0, 30", got)
		}
		if got := h.prober.sentTo("sip:z@h"); !slices.Equal(got, durations(40)) {
			t.Fatalf("new contact probed at %v, want 40", got)
		}
		removed := h.eventsOf(StatusChanged)
		last := removed[len(removed)-2] // then z becomes Reachable
		if last.URI != "sip:y@h" || last.From != qualify.Reachable || last.To != qualify.Removed || last.Routable {
			t.Fatalf("removal event %+v", last)
		}
		if got := h.prober.sentTo("sip:y@h"); !slices.Equal(got, durations(0, 30)) {
			t.Fatalf("removed contact probed at %v", got)
		}
	})
}

// TestReloadResetsChangedContacts: a contact whose options changed starts
// again as NonQualified (qualify-semantics §8).
func TestReloadResetsChangedContacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		p := referencePolicy()
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(40 * time.Second)
		p.Failures = 5
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		changes := h.eventsOf(StatusChanged)
		reset := changes[len(changes)-1]
		if reset.From != qualify.Reachable || reset.To != qualify.NonQualified || reset.FailureThreshold != 5 {
			t.Fatalf("reset event %+v", reset)
		}
		h.until(41 * time.Second)
		if got := h.prober.sentTo(trunk); !slices.Equal(got, durations(0, 30, 40)) {
			t.Fatalf("changed contact probed at %v, want a new first probe at 40", got)
		}
		// A changed probe option is a change too.
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p, Probe: &probe.Options{Transport: "tcp"}})
		if c := h.e.Contacts()[0]; c.Status != qualify.NonQualified {
			t.Fatalf("contact with new probe options kept status %v", c.Status)
		}
	})
}

// TestReloadResetsContactInFlight: a contact whose options a reload changes
// while its probe is in flight starts again as NonQualified; the old
// probe's answer is not applied, and a manual qualify waiting for it
// reports "contact removed" (qualify-semantics §8).
func TestReloadResetsContactInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(string, time.Duration) reply { return reply{After: time.Second} })
		p := referencePolicy()
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(500 * time.Millisecond)
		waiter := make(chan []ContactResult)
		go func() {
			res, _ := h.e.Qualify(t.Context(), "a")
			waiter <- res
		}()
		synctest.Wait()
		q := p
		q.Failures = 5
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &q})
		if res := <-waiter; len(res) != 1 || !errors.Is(res[0].Err, ErrRemoved) {
			t.Fatalf("waiter of a reset contact got %+v", res)
		}
		h.until(1200 * time.Millisecond) // the old probe has answered
		if c := h.e.Contacts()[0]; c.Status != qualify.NonQualified {
			t.Fatalf("the old probe's answer was applied: %+v", c)
		}
		h.until(1600 * time.Millisecond) // the new first probe, sent at 0.5 s, has answered
		if got := h.prober.sentTo(trunk); !slices.Equal(got, durations(0, 0.5)) {
			t.Fatalf("probes sent at %v, want 0 and the new first probe at 0.5", got)
		}
		if c := h.e.Contacts()[0]; c.Status != qualify.Reachable || c.FailureThreshold != 5 {
			t.Fatalf("after the new first probe: %+v", c)
		}
	})
}

func TestReloadRemovesContactInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(string, time.Duration) reply { return reply{Silent: true} })
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(time.Second)
		waiter := make(chan []ContactResult)
		go func() {
			res, _ := h.e.Qualify(t.Context(), "a")
			waiter <- res
		}()
		synctest.Wait()
		h.apply(AoR{Name: "b", Contacts: []string{"sip:b@h"}, Policy: new(referencePolicy())})
		if res := <-waiter; len(res) != 1 || !errors.Is(res[0].Err, ErrRemoved) {
			t.Fatalf("waiter of a removed contact got %+v", res)
		}
		h.until(10 * time.Second)
		var forTrunk []Event
		for _, ev := range h.eventsOf(0) {
			if ev.AoR == "a" {
				forTrunk = append(forTrunk, ev)
			}
		}
		if len(forTrunk) != 2 || forTrunk[0].To != qualify.Removed || forTrunk[1].Kind != AvailabilityChanged || forTrunk[1].Available {
			t.Fatalf("events of the removed AoR: %+v", forTrunk)
		}
		h.e.mu.Lock()
		free, slots := len(h.e.free), len(h.e.slots)
		h.e.mu.Unlock()
		wantFree, wantSlots := 1, 2
		if free != wantFree || slots != wantSlots {
			t.Fatalf("after the removed probe returned: %d free of %d slots, want %d of %d", free, slots, wantFree, wantSlots)
		}
		h.apply(AoR{Name: "b", Contacts: []string{"sip:b@h", "sip:c@h"}, Policy: new(referencePolicy())})
		h.until(11 * time.Second)
		if got := h.prober.sentTo("sip:c@h"); !slices.Equal(got, durations(10)) {
			t.Fatalf("contact in the reused slot probed at %v, want 10", got)
		}
	})
}

func TestInvalidReloadKeepsRunningSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(time.Second)
		before := h.e.AoRs()
		if err := h.e.Apply([]AoR{{Name: "a"}, {Name: "a"}}); err == nil {
			t.Fatal("duplicate AoR accepted")
		}
		if after := h.e.AoRs(); !reflect.DeepEqual(before, after) {
			t.Fatalf("an invalid reload changed the state:\n%+v\n%+v", before, after)
		}
	})
}

func TestSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(uri string, _ time.Duration) reply {
			return reply{Silent: uri == "sip:dead@h", After: time.Millisecond}
		})
		p := qualify.Policy{Frequency: 10 * time.Second, Timeout: time.Second}
		h.apply(AoR{Name: "a", Contacts: []string{"sip:ok@h", "sip:dead@h"}, Policy: &p},
			AoR{Name: "b", Contacts: []string{"sip:dead@h"}, Policy: &p},
			AoR{Name: "off", Contacts: []string{"sip:off@h"}})
		h.until(2 * time.Second)
		want := Summary{ByStatus: [4]int{1, 1, 2, 0}, Routable: 2, AoRs: 3, AoRsAvailable: 2}
		if got := h.e.Summary(); got != want {
			t.Fatalf("summary %+v, want %+v", got, want)
		}
	})
}

// TestReloadLargeAndSmallAoRs: the reload finds an AoR's old contacts by
// URI both by a scan (up to smallSet contacts) and by a map (beyond):
// either way kept contacts keep their slot and schedule, dropped ones get
// Removed in configuration order, and a duplicate URI is refused.
func TestReloadLargeAndSmallAoRs(t *testing.T) {
	for _, n := range []int{3, smallSet + 4} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{}, answersUntil(time.Hour))
			p := referencePolicy()
			uris := make([]string, n)
			for i := range uris {
				uris[i] = "sip:c" + string(rune('a'+i)) + "@h"
			}
			h.apply(AoR{Name: "a", Contacts: uris, Policy: &p})
			h.until(40 * time.Second)
			before := map[string]ContactSnapshot{}
			for _, c := range h.e.Contacts() {
				before[c.URI] = c
			}
			// Drop the first and the third, add one, keep the rest in a new order.
			next := append([]string{"sip:new@h"}, uris[3:]...)
			next = append(next, uris[1])
			h.apply(AoR{Name: "a", Contacts: next, Policy: &p})
			for _, c := range h.e.Contacts() {
				if old, ok := before[c.URI]; ok && !reflect.DeepEqual(c, old) {
					t.Fatalf("n=%d: kept contact %s changed:\n%+v\n%+v", n, c.URI, old, c)
				}
			}
			changes := h.eventsOf(StatusChanged)
			gone := changes[len(changes)-2:]
			if gone[0].URI != uris[0] || gone[1].URI != uris[2] || gone[0].To != qualify.Removed || gone[1].To != qualify.Removed {
				t.Fatalf("n=%d: removal events %+v, want %s then %s", n, gone, uris[0], uris[2])
			}
			if len(h.e.Contacts()) != len(next) {
				t.Fatalf("n=%d: %d contacts, want %d", n, len(h.e.Contacts()), len(next))
			}
			dup := append(slices.Clone(next), next[len(next)-1])
			if err := h.e.Apply([]AoR{{Name: "a", Contacts: dup, Policy: &p}}); !errors.Is(err, ErrConfig) {
				t.Fatalf("n=%d: duplicate URI accepted: %v", n, err)
			}
		})
	}
}

// TestApplySizesTheTableOnce: a first load of many contacts allocates the
// table and the schedule at their final size instead of doubling them; a
// reload that keeps every contact grows neither.
func TestApplySizesTheTableOnce(t *testing.T) {
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	aors := make([]AoR, 1000)
	for i := range aors {
		aors[i] = AoR{Name: fmt.Sprint("a", i), Contacts: []string{fmt.Sprintf("sip:%d@h", i), fmt.Sprintf("sip:%d@g", i)}, Policy: new(referencePolicy())}
	}
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	if len(e.slots) != 2000 || cap(e.slots) > 2048 {
		t.Fatalf("table of %d slots has capacity %d, want about 2000", len(e.slots), cap(e.slots))
	}
	slots := &e.slots[0]
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	if &e.slots[0] != slots {
		t.Fatal("a reload keeping every contact reallocated the table")
	}
}

// TestApplyPlacesNewContactsInProbeOrder checks that new contacts get
// their slots in the order their first probes are due, while each AoR
// keeps its contacts in configuration order and each contact the delay
// drawn for it in that order.
func TestApplyPlacesNewContactsInProbeOrder(t *testing.T) {
	draws := []float64{0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8}
	next := 0
	now := time.Unix(1000, 0)
	rnd := func() float64 { u := draws[next%len(draws)]; next++; return u }
	e, err := New(Config{Prober: &fakeProber{}, Rand: rnd, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	p := referencePolicy() // F = 30 s
	off := p
	off.Frequency = 0
	aors := []AoR{
		{Name: "a", Contacts: []string{"sip:1@h", "sip:2@h"}, Policy: &p},
		{Name: "b", Contacts: []string{"sip:3@h"}, Policy: &p},
		{Name: "never", Contacts: []string{"sip:0@h"}, Policy: &off},
		{Name: "c", Contacts: []string{"sip:4@h", "sip:5@h"}, Policy: &p},
	}
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	// The contacts draw 0.9, 0.1, 0.5, (none), 0.3, 0.7 in configuration order.
	want := map[string]float64{"sip:1@h": 0.9, "sip:2@h": 0.1, "sip:3@h": 0.5, "sip:4@h": 0.3, "sip:5@h": 0.7}
	checkPlaced(t, e, aors, now, p.Frequency, want)
	var dues []mono
	for id := range e.slots {
		if c := &e.slots[id]; c.policy.Enabled() {
			dues = append(dues, c.due())
		}
	}
	if !slices.IsSorted(dues) {
		t.Errorf("slots are not in the order of their first probes: %v", dues)
	}

	// A reload adding a contact between two kept ones keeps the AoR's
	// order and the kept contacts' schedule.
	aors[3].Contacts = []string{"sip:4@h", "sip:6@h", "sip:5@h"}
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	want["sip:6@h"] = 0.2
	checkPlaced(t, e, aors, now, p.Frequency, want)
}

// TestApplyPlacesTiesInConfigurationOrder checks that contacts whose
// first probes are due at the same time get their slots in configuration
// order, so that they are probed in that order.
func TestApplyPlacesTiesInConfigurationOrder(t *testing.T) {
	draws := []float64{0.2, 0.5, 0.8}
	n := 0
	rnd := func() float64 { n++; return draws[n*n%len(draws)] }
	e, err := New(Config{Prober: &fakeProber{}, Rand: rnd})
	if err != nil {
		t.Fatal(err)
	}
	aors := make([]AoR, 1000)
	for i := range aors {
		aors[i] = AoR{Name: fmt.Sprint("a", i), Contacts: []string{fmt.Sprintf("sip:%d@h", i)}, Policy: new(referencePolicy())}
	}
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	last := map[mono]uint32{} // per due time, the slot of the previous contact
	for _, def := range aors {
		id := e.aors[def.Name].ids[0]
		due := e.slots[id].due()
		if prev, ok := last[due]; ok && id < prev {
			t.Fatalf("AoR %s has slot %d, before slot %d of an AoR listed earlier and due at the same time", def.Name, id, prev)
		}
		last[due] = id
	}
}

// checkPlaced checks that each AoR lists its contacts in configuration
// order with the first delay want gives as a fraction of f.
func checkPlaced(t *testing.T, e *Engine, aors []AoR, now time.Time, f time.Duration, want map[string]float64) {
	t.Helper()
	for _, def := range aors {
		a := e.aors[def.Name]
		for k, u := range def.Contacts {
			c := &e.slots[a.ids[k]]
			if c.uri != u {
				t.Fatalf("AoR %s contact %d is %s, want %s", def.Name, k, c.uri, u)
			}
			if d, ok := want[u]; ok && !c.due().wall().Equal(now.Add(time.Duration(d*float64(f)))) {
				t.Errorf("%s first probe at %v, want %v", u, c.due().wall().Sub(now), time.Duration(d*float64(f)))
			}
		}
	}
}

// TestApplyConcurrently checks that Applys from several goroutines, which
// read the table without the engine's lock while they plan, leave it as
// one of the sets defines it (run with -race, as make test does).
func TestApplyConcurrently(t *testing.T) {
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	sets := [2][]AoR{}
	for k := range sets {
		for i := range 50 + 10*k {
			sets[k] = append(sets[k], AoR{Name: fmt.Sprint("a", i), Contacts: []string{fmt.Sprintf("sip:%d@h", i+k*25)}, Policy: new(referencePolicy())})
		}
	}
	done := make(chan error)
	for k := range sets {
		go func() {
			var err error
			for range 20 {
				err = errors.Join(err, e.Apply(sets[k]))
			}
			done <- err
		}()
	}
	for range sets {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if s := e.Summary(); s.AoRs != 50 && s.AoRs != 60 || s.ByStatus[qualify.NonQualified] != s.AoRs {
		t.Errorf("summary after concurrent reloads: %+v", s)
	}
}

// BenchmarkReload1M is a reload of a million unchanged contacts. Besides
// its time it reports lock-wait-s, the longest another goroutine waited
// for the engine's lock during the reloads: no probe starts or finishes
// meanwhile. Run it with -benchtime=3x.
func BenchmarkReload1M(b *testing.B) {
	e, aors := loaded(b, 1_000_000, referencePolicy())
	stop := watchLock(e)
	for b.Loop() {
		if err := e.Apply(aors); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(stop().Seconds(), "lock-wait-s")
}

// watchLock is enginetest.WatchLock over e's Summary.
func watchLock(e *Engine) (stop func() time.Duration) {
	return enginetest.WatchLock(func() { _ = e.Summary() }, nil)
}

// loaded returns an engine, not running, that has applied
// enginetest.NumberedAoRs(n, p), and those AoRs.
func loaded(tb testing.TB, n int, p qualify.Policy) (*Engine, []AoR) {
	tb.Helper()
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		tb.Fatal(err)
	}
	aors := enginetest.NumberedAoRs(n, p)
	if err := e.Apply(aors); err != nil {
		tb.Fatal(err)
	}
	return e, aors
}

// TestReloadAllocatesPerSetNotPerContact checks that a reload keeping every
// contact allocates a bounded number of objects, not some per AoR or
// contact: with the engine locked, each allocation is time no probe can
// start, and a million of them were.
func TestReloadAllocatesPerSetNotPerContact(t *testing.T) {
	e, aors := loaded(t, 2000, referencePolicy())
	allocs := testing.AllocsPerRun(5, func() {
		if err := e.Apply(aors); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("a reload of 2,000 contacts allocated %v objects, want at most 100", allocs)
	}
}

// TestApplyFuncKeepsNoDefinition checks ApplyFunc's promise that it reads
// the AoRs during the call only: once applied, the caller's definitions
// and their contact lists can be collected. The daemon applies the
// configuration's own AoRs, a million of them, and drops them after.
func TestApplyFuncKeepsNoDefinition(t *testing.T) {
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	defs, contacts := applyDefinitions(t, e, 100)
	runtime.GC()
	if defs.Value() != nil || contacts.Value() != nil {
		t.Errorf("after ApplyFunc the engine still references the definitions (%v) or a contact list (%v)",
			defs.Value() != nil, contacts.Value() != nil)
	}
	if s := e.Summary(); s.AoRs != 100 || s.ByStatus[qualify.NonQualified] != 100 {
		t.Errorf("summary %+v, want 100 AoRs of one NonQualified contact", s)
	}
}

// TestApplyKeepsNoCallerName: an AoR's name that is part of a larger
// string of the caller (as pjsip's are) does not keep that string alive.
func TestApplyKeepsNoCallerName(t *testing.T) {
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<16) + "trunk"
	text := weak.Make(unsafe.StringData(big))
	aor := AoR{Name: big[1<<16:], Contacts: []string{"sip:trunk@192.0.2.1"}, Policy: new(referencePolicy())}
	if err := e.Apply([]AoR{aor}); err != nil {
		t.Fatal(err)
	}
	aor, big = AoR{}, ""
	runtime.GC()
	if text.Value() != nil {
		t.Error("the engine keeps the string its AoR's name was cut from")
	}
	if _, ok := e.AoR("trunk"); !ok {
		t.Error("AoR trunk not found by name")
	}
}

// applyDefinitions applies n AoRs embedded in definitions of the caller's
// own type, as the daemon's configuration has them, and returns weak
// pointers to the definitions and to the first AoR's contact list.
func applyDefinitions(t *testing.T, e *Engine, n int) (weak.Pointer[definition], weak.Pointer[string]) {
	defs := make([]definition, n)
	for i, a := range enginetest.NumberedAoRs(n, referencePolicy()) {
		defs[i] = definition{AoR: a, Line: i + 1}
	}
	if err := e.ApplyFunc(n, func(i int) *AoR { return &defs[i].AoR }); err != nil {
		t.Fatal(err)
	}
	return weak.Make(&defs[0]), weak.Make(&defs[0].Contacts[0])
}

// definition is a caller's AoR definition, which embeds the engine's.
type definition struct {
	AoR
	Line int
}
