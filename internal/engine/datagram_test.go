package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// newDatagramHarness is newHarness with the datagram fake, whatever pass
// of TestMain runs.
func newDatagramHarness(t *testing.T, cfg Config, script func(string, time.Duration) reply) *harness {
	was := datagramProbes
	datagramProbes = true
	defer func() { datagramProbes = was }()
	return newHarness(t, cfg, script)
}

// elapsedOf returns the elapsed times and proceeding flags of steps.
func elapsedOf(steps []fakeStep) ([]time.Duration, []bool) {
	var el []time.Duration
	var pr []bool
	for _, s := range steps {
		el, pr = append(el, s.elapsed), append(pr, s.proceeding)
	}
	return el, pr
}

// silentTrunk starts a datagram harness with the trunk silent and
// returns it at offset at, with the key of the trunk's first probe.
func silentTrunk(t *testing.T, at time.Duration) (*harness, uint64) {
	h := newDatagramHarness(t, Config{}, func(string, time.Duration) reply { return reply{Silent: true} })
	p := referencePolicy()
	h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
	h.until(at)
	return h, h.datagrams.stepsOf(trunk)[0].key
}

func TestDatagramRetransmitsOnTimerE(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDatagramHarness(t, Config{}, func(uri string, _ time.Duration) reply {
			if uri == trunk {
				return reply{Silent: true}
			}
			return reply{After: 700 * time.Millisecond}
		})
		p := referencePolicy() // timeout 3 s
		h.apply(AoR{Name: "a", Contacts: []string{trunk, "sip:b@192.0.2.8"}, Policy: &p})
		h.until(2900 * time.Millisecond)
		if c := h.e.Counters(); c.InFlight != 1 {
			t.Fatalf("in flight at 2.9 s: %d, want the silent contact's probe", c.InFlight)
		}
		h.until(3100 * time.Millisecond)
		// Sends at 0, 0.5 and 1.5 s; at 3 s the deadline.
		if got, _ := elapsedOf(h.datagrams.stepsOf(trunk)); !slices.Equal(got, durations(0, 0.5, 1.5, 3)) {
			t.Fatalf("silent contact stepped at %v, want 0, 0.5, 1.5, 3", got)
		}
		// Answered at 0.7 s: one retransmission before, none after.
		if got, _ := elapsedOf(h.datagrams.stepsOf("sip:b@192.0.2.8")); !slices.Equal(got, durations(0, 0.5)) {
			t.Fatalf("answered contact stepped at %v, want 0, 0.5", got)
		}
		failed := h.eventsOf(ProbeFailed)
		if len(failed) != 1 || failed[0].URI != trunk || failed[0].Reason != qualify.ReasonTimeout || failed[0].Time != h.t0.Add(3*time.Second) {
			t.Fatalf("failure events: %+v", failed)
		}
		c := h.e.Counters()
		if c.InFlight != 0 || c.Probes[qualify.ReasonNone] != 1 || c.Probes[qualify.ReasonTimeout] != 1 {
			t.Fatalf("counters at 3.1 s: %+v", c)
		}
		// The next probes: the silent one after the retry interval, the
		// other one F after its start; the entries moved there.
		h.until(31 * time.Second)
		if got := h.prober.sentTo(trunk); len(got) < 2 || !slices.Equal(got[:2], durations(0, 5)) {
			t.Fatalf("silent contact probed at %v, want 0, 5, ...", got)
		}
		if got := h.prober.sentTo("sip:b@192.0.2.8"); !slices.Equal(got, durations(0, 30)) {
			t.Fatalf("answered contact probed at %v, want 0, 30", got)
		}
	})
}

func TestDatagramProvisionalSlowsRetransmissions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDatagramHarness(t, Config{}, func(string, time.Duration) reply {
			return reply{After: 200 * time.Millisecond, Code: 100}
		})
		p := referencePolicy()
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(3100 * time.Millisecond)
		el, pr := elapsedOf(h.datagrams.stepsOf(trunk))
		// After the 100 Trying at 0.2 s, the next send waits T2 (4 s),
		// which the 3 s deadline cuts short.
		if !slices.Equal(el, durations(0, 0.5, 3)) || !slices.Equal(pr, []bool{false, true, true}) {
			t.Fatalf("steps at %v, proceeding %v; want 0, 0.5, 3 and false, true, true", el, pr)
		}
		if c := h.e.Counters(); c.Probes[qualify.ReasonTimeout] != 1 {
			t.Fatalf("a provisional answer ended the probe: %+v", c.Probes)
		}
	})
}

func TestDatagramAnswerChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, key := silentTrunk(t, 100*time.Millisecond)
		at := time.Now()
		other := netip.MustParseAddrPort("192.0.2.99:5060")
		for _, c := range []struct {
			name string
			key  uint64
			from netip.AddrPort
			want qualify.Match
		}{
			{"from another address", key, other, qualify.MatchWrongSource},
			{"another start", key ^ 1<<40, fakeDest, qualify.MatchLate},
			{"a slot never made", key&^(1<<32-1) | 7, fakeDest, qualify.MatchLate},
			{"the probe's", key, fakeDest, qualify.Matched},
			{"again", key, fakeDest, qualify.MatchLate},
		} {
			if got := h.e.answer(c.key, qualify.Answer{From: c.from, Code: 200, At: at}); got != c.want {
				t.Fatalf("answer %s: %v, want %v", c.name, got, c.want)
			}
		}
		if c := h.e.Counters(); c.Probes[qualify.ReasonNone] != 1 || c.InFlight != 0 {
			t.Fatalf("counters: %+v, want one success and nothing in flight", c)
		}
		// The probe's entry moved to the next probe: no retransmission.
		h.until(29 * time.Second)
		if got, _ := elapsedOf(h.datagrams.stepsOf(trunk)); !slices.Equal(got, durations(0)) {
			t.Fatalf("steps after the answer: %v, want the first send only", got)
		}
		if got := h.prober.sentTo(trunk); !slices.Equal(got, durations(0)) {
			t.Fatalf("probed at %v before F", got)
		}
		// Each probe of the slot has its own key.
		h.until(30200 * time.Millisecond)
		if steps := h.datagrams.stepsOf(trunk); len(steps) < 2 || steps[len(steps)-1].key == key {
			t.Fatalf("the next probe reused the key: %+v", steps)
		}
	})
}

func TestDatagramRemovedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, key := silentTrunk(t, time.Second)
		h.apply()
		if c := h.e.Counters(); c.InFlight != 0 || c.Waiting != 0 {
			t.Fatalf("after the removal: %+v", c)
		}
		if got := h.e.answer(key, qualify.Answer{From: fakeDest, Code: 200, At: time.Now()}); got != qualify.MatchLate {
			t.Fatalf("answer to a removed contact's probe: %v", got)
		}
		h.until(5 * time.Second)
		if got, _ := elapsedOf(h.datagrams.stepsOf(trunk)); !slices.Equal(got, durations(0, 0.5)) {
			t.Fatalf("a removed contact's probe stepped at %v, want 0, 0.5 only", got)
		}
	})
}

func TestDatagramShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, key := silentTrunk(t, 100*time.Millisecond)
		errc := make(chan error, 1)
		go func() {
			res, err := h.e.Qualify(context.Background(), "a")
			if err == nil {
				err = res[0].Err
			}
			errc <- err
		}()
		synctest.Wait()
		h.stop()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("manual qualify of a probe in flight at shutdown: %v, want canceled", err)
		}
		if got := h.e.answer(key, qualify.Answer{From: fakeDest, Code: 200, At: time.Now()}); got != qualify.MatchLate {
			t.Fatalf("answer after Run returned: %v, want late", got)
		}
		if c := h.e.Counters(); c.InFlight != 0 || c.Probes != [5]uint64{} {
			t.Fatalf("counters after shutdown: %+v", c)
		}
	})
}

func TestDatagramOtherProbesGoAsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDatagramHarness(t, Config{}, func(string, time.Duration) reply { return reply{After: 10 * time.Millisecond} })
		p := referencePolicy()
		tcp := "sip:pbx@192.0.2.9;transport=tcp"
		h.apply(AoR{Name: "a", Contacts: []string{tcp}, Policy: &p})
		h.until(time.Second)
		if steps := h.datagrams.stepsOf(tcp); len(steps) != 0 {
			t.Fatalf("a probe the prober does not send as a datagram was stepped: %+v", steps)
		}
		if c := h.e.Counters(); c.Probes[qualify.ReasonNone] != 1 {
			t.Fatalf("counters: %+v, want the Start probe applied", c)
		}
	})
}

// TestDatagramAnswerAtAnEvent: answers that come at the very instant of
// the probe's next event, before or after the job of that event: either
// way no result is lost and no probe starts before F. The bubble rarely
// lets an answer in between the loop taking the entry and the job
// looking (the jobMoved case); TestDatagramJobKinds covers that one.
func TestDatagramAnswerAtAnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDatagramHarness(t, Config{}, func(string, time.Duration) reply { return reply{After: fakeT1} })
		p := referencePolicy()
		var aors []AoR
		for i := range 200 {
			u := fmt.Sprintf("sip:c%d@192.0.2.1", i)
			aors = append(aors, AoR{Name: u[4:], Contacts: []string{u}, Policy: &p})
		}
		h.apply(aors...)
		h.until(29 * time.Second)
		retransmitted := 0
		for _, a := range aors {
			u := a.Contacts[0]
			if got := h.prober.sentTo(u); !slices.Equal(got, durations(0)) {
				t.Fatalf("%s probed at %v before F, want 0 only", u, got)
			}
			el, _ := elapsedOf(h.datagrams.stepsOf(u))
			switch {
			case slices.Equal(el, durations(0, 0.5)):
				retransmitted++
			case !slices.Equal(el, durations(0)):
				t.Fatalf("%s stepped at %v", u, el)
			}
		}
		if c := h.e.Counters(); c.Probes[qualify.ReasonNone] != 200 || c.InFlight != 0 {
			t.Fatalf("counters %+v, want 200 successes", c)
		}
		t.Logf("%d of 200 answers came after the loop took the entry", retransmitted)
	})
}

// TestDatagramJobKinds covers what a job does with each state of its
// slot, the race of TestDatagramAnswerAtAnEvent included, which a
// synctest bubble rarely interleaves.
func TestDatagramJobKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		c    contact
		due  int64
		want jobKind
	}{
		{"due", contact{next: 100}, 100, jobStart},
		{"due, run late", contact{next: 100}, 120, jobStart},
		{"removed", contact{zombie: true, running: true, datagram: true, next: 100}, 150, jobGone},
		{"an event of the probe", contact{running: true, datagram: true, next: 100}, 600, jobStep},
		{"answered, next probe later", contact{next: 30_000}, 600, jobMoved},
		{"answered, qualify off", contact{}, 600, jobMoved},
	} {
		if got := c.c.job(c.due); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDatagramCountersWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := silentTrunk(t, time.Second)
		// The probe's entry waits for its next event, not for a probe.
		if c := h.e.Counters(); c.InFlight != 1 || c.Waiting != 0 {
			t.Errorf("one contact, its probe in flight: InFlight %d, Waiting %d; want 1, 0", c.InFlight, c.Waiting)
		}
		h.until(3100 * time.Millisecond)
		if c := h.e.Counters(); c.InFlight != 0 || c.Waiting != 1 {
			t.Errorf("after the timeout: InFlight %d, Waiting %d; want 0, 1", c.InFlight, c.Waiting)
		}
	})
}

// cancelProber: datagram probes for IP URIs; ";transport=tcp" goes
// through Start and its result comes only when release is closed,
// keeping Run (sched.Run's wg.Wait) from returning.
type cancelProber struct {
	asyncFake
	answer  func(uint64, qualify.Answer) qualify.Match
	release chan struct{}
	mu      sync.Mutex
	keys    []uint64
}

func (p *cancelProber) Datagram(t qualify.Target) (netip.AddrPort, bool) {
	return fakeDest, !strings.Contains(t.URI, ";transport=tcp")
}
func (p *cancelProber) AnswerDatagrams(f func(uint64, qualify.Answer) qualify.Match) { p.answer = f }
func (p *cancelProber) Step(t qualify.Target, key uint64, elapsed time.Duration, _ bool) (time.Duration, qualify.Result, bool) {
	if elapsed >= t.Timeout {
		return 0, qualify.Result{Reason: qualify.ReasonTimeout}, true
	}
	if elapsed == 0 {
		p.mu.Lock()
		p.keys = append(p.keys, key)
		p.mu.Unlock()
	}
	return min(elapsed+fakeT1, t.Timeout-elapsed), qualify.Result{}, false
}
func (p *cancelProber) Start(ctx context.Context, t qualify.Target, tag uint64, done func(uint64, qualify.Result)) {
	go func() { <-p.release; done(tag, qualify.Result{Reason: qualify.ReasonTimeout}) }()
}

// TestDatagramAnswerAfterCancel: results that arrive after Run's context
// is cancelled are not applied, also while Run waits for a Start
// probe to return.
func TestDatagramAnswerAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &cancelProber{asyncFake: asyncFake{&fakeProber{}}, release: make(chan struct{})}
		e, err := New(Config{Prober: p, Rand: func() float64 { return 0 }})
		cancel, done := runAoR(t, e, err, referencePolicy(), "sip:a@192.0.2.1", "sip:b@192.0.2.2;transport=tcp")
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		cancel()
		synctest.Wait() // Run waits for the Start probe
		p.mu.Lock()
		key := p.keys[0]
		p.mu.Unlock()
		got := p.answer(key, qualify.Answer{From: fakeDest, Code: 200, At: time.Now()})
		close(p.release)
		<-done
		if got != qualify.MatchLate || e.Counters().Probes[qualify.ReasonNone] != 0 {
			t.Errorf("answer after cancel: %v, successes applied %d; want late, 0", got, e.Counters().Probes[qualify.ReasonNone])
		}
	})
}
