package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// silentTrunk starts a harness with the trunk silent, under the reference
// policy (timeout 3 s), and returns it at offset at.
func silentTrunk(t *testing.T, cfg Config, at time.Duration, contacts ...string) *harness {
	h := newHarness(t, cfg, func(string, time.Duration) reply { return reply{Silent: true} })
	h.apply(AoR{Name: "a", Contacts: append([]string{trunk}, contacts...), Policy: new(referencePolicy())})
	h.until(at)
	return h
}

func TestCountersInFlightAndWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := silentTrunk(t, Config{}, time.Second)
		// The probe in flight is not waiting for its next probe.
		if c := h.e.Counters(); c.InFlight != 1 || c.Waiting != 0 {
			t.Errorf("one contact, its probe in flight: InFlight %d, Waiting %d; want 1, 0", c.InFlight, c.Waiting)
		}
		h.until(3100 * time.Millisecond)
		if c := h.e.Counters(); c.InFlight != 0 || c.Waiting != 1 || c.Probes[qualify.ReasonTimeout] != 1 {
			t.Errorf("after the timeout: %+v; want InFlight 0, Waiting 1, one timeout", c)
		}
	})
}

func TestRemovedInFlightIsNotApplied(t *testing.T) {
	// A contact removed while its probe is in flight: its slot is held
	// until the probe returns (at the 3 s timeout), then freed; the
	// result is not applied and the contact not probed again.
	synctest.Test(t, func(t *testing.T) {
		h := silentTrunk(t, Config{}, time.Second)
		h.apply()
		if c := h.e.Counters(); c.InFlight != 1 || c.Waiting != 0 {
			t.Fatalf("removed, its probe in flight: %+v", c)
		}
		h.until(10 * time.Second)
		if c := h.e.Counters(); c.InFlight != 0 || c.Waiting != 0 || c.Probes != [qualify.NumReasons]uint64{} {
			t.Fatalf("after the removed contact's probe returned: %+v", c)
		}
		h.e.mu.Lock()
		free := len(h.e.free)
		h.e.mu.Unlock()
		if free != 1 {
			t.Fatalf("%d free slots, want the removed contact's", free)
		}
		if got := h.prober.sentTo(trunk); !slices.Equal(got, durations(0)) {
			t.Fatalf("removed contact probed at %v, want 0 only", got)
		}
		if evs := h.eventsOf(0); len(evs) != 2 || evs[0].To != qualify.Removed || evs[1].Kind != AvailabilityChanged {
			t.Fatalf("events: %+v, want the removal and the AoR's availability only", evs)
		}
	})
}

func TestShutdownAnswersWaiters(t *testing.T) {
	// At shutdown the waiters of a manual qualify get the context's
	// error: that of a probe in flight, and that of a probe that had not
	// started (MaxInFlight 1 keeps the second contact's probe waiting).
	synctest.Test(t, func(t *testing.T) {
		h := silentTrunk(t, Config{MaxInFlight: 1}, 100*time.Millisecond, "sip:b@192.0.2.8")
		errc := make(chan []error, 1)
		go func() {
			res, err := h.e.Qualify(context.Background(), "a")
			if err != nil {
				errc <- []error{err}
				return
			}
			errc <- []error{res[0].Err, res[1].Err}
		}()
		synctest.Wait()
		if c := h.e.Counters(); c.InFlight != 1 || c.Waiting != 1 {
			t.Fatalf("before shutdown: %+v, want one probe in flight and one waiting", c)
		}
		h.stop()
		if errs := <-errc; len(errs) != 2 || !errors.Is(errs[0], context.Canceled) || !errors.Is(errs[1], context.Canceled) {
			t.Fatalf("manual qualify at shutdown: %v, want canceled for both contacts", errs)
		}
		if c := h.e.Counters(); c.InFlight != 0 || c.Probes != [qualify.NumReasons]uint64{} {
			t.Fatalf("counters after shutdown: %+v", c)
		}
	})
}

// lateProber answers every probe with a success only when release is
// closed, whatever its context says: a probe whose result comes after
// Run's cancellation, while Run waits for it.
type lateProber struct{ release chan struct{} }

func (p lateProber) Start(_ context.Context, _ probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	go func() {
		<-p.release
		done(tag, qualify.Result{Sent: time.Now(), Code: 200})
	}()
}

func TestResultAfterCancelIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := lateProber{release: make(chan struct{})}
		e, err := New(Config{Prober: p, Rand: func() float64 { return 0 }})
		cancel, done := runAoR(t, e, err, referencePolicy(), trunk)
		time.Sleep(100 * time.Millisecond)
		cancel()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned with a probe in flight")
		default:
		}
		close(p.release)
		<-done
		if c := e.Counters(); c.Probes[qualify.ReasonNone] != 0 || c.InFlight != 0 {
			t.Errorf("after a success that came after the cancellation: %+v; want none applied, none in flight", c)
		}
		if c := e.Contacts()[0]; c.Status != qualify.NonQualified || !c.Last.At.IsZero() {
			t.Errorf("the late result was applied: %+v", c)
		}
	})
}
