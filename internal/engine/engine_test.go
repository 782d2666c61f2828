package engine

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

const trunk = "sip:pbx07@192.0.2.7:5060"

// referencePolicy is the contract's example: F=30, T=3, N=3, R=2.
func referencePolicy() qualify.Policy {
	return qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second}
}

// answersUntil answers in 10 ms until offset dead, then stays silent.
func answersUntil(dead time.Duration) func(string, time.Duration) reply {
	return func(_ string, at time.Duration) reply {
		if at >= dead {
			return reply{Silent: true}
		}
		return reply{After: 10 * time.Millisecond}
	}
}

type edge struct {
	kind     EventKind
	at       float64
	from, to qualify.Status
	failures int
	next     float64
}

func checkEdges(t *testing.T, h *harness, want []edge) {
	t.Helper()
	got := h.eventsOf(0)
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		next := time.Duration(0)
		if !g.Next.IsZero() {
			next = g.Next.Sub(h.t0)
		}
		if g.Kind != w.kind || g.Time.Sub(h.t0) != secs(w.at) || g.From != w.from || g.To != w.to ||
			g.Failures != w.failures || next != secs(w.next) {
			t.Errorf("event %d: %v at %v %v->%v failures %d next %v; want %+v",
				i, g.Kind, g.Time.Sub(h.t0), g.From, g.To, g.Failures, next, w)
		}
	}
}

// TestReferenceTimelineGoesDown: the reference timeline, going down
// (qualify-semantics §9).
func TestReferenceTimelineGoesDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(89*time.Second))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(143 * time.Second)
		// Down from 103 s, probed on the backoff: 2, 4, 8, 16 s after each
		// timeout.
		if got, want := h.prober.sentTo(trunk), durations(0, 30, 60, 90, 95, 100, 105, 112, 123, 142); !slices.Equal(got, want) {
			t.Fatalf("probes sent at %v, want %v", got, want)
		}
		checkEdges(t, h, []edge{
			{StatusChanged, 0.01, qualify.NonQualified, qualify.Reachable, 0, 30},
			{ProbeFailed, 93, qualify.Reachable, qualify.Reachable, 1, 95},
			{ProbeFailed, 98, qualify.Reachable, qualify.Reachable, 2, 100},
			{StatusChanged, 103, qualify.Reachable, qualify.Unreachable, 3, 105},
			{AvailabilityChanged, 103, 0, 0, 0, 0},
		})
		if ev := h.eventsOf(StatusChanged)[1]; ev.Routable || ev.Reason != qualify.ReasonTimeout {
			t.Fatalf("Unreachable event: routable=%v reason=%v", ev.Routable, ev.Reason)
		}
		if a, _ := h.e.AoR("pbx07"); a.Available {
			t.Fatal("AoR with its only contact Unreachable is available")
		}
	})
}

// TestReferenceTimelineRetryAnswered: the reference timeline with the first
// retry answered (qualify-semantics §9): the success that ends the run
// publishes FailuresCleared, so that a subscriber counting failing
// contacts from their first failed probe counts this one healthy again.
func TestReferenceTimelineRetryAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			if at >= 89*time.Second && at < 94*time.Second {
				return reply{Silent: true}
			}
			return reply{After: 20 * time.Millisecond}
		})
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(126 * time.Second)
		if got, want := h.prober.sentTo(trunk), durations(0, 30, 60, 90, 95, 125); !slices.Equal(got, want) {
			t.Fatalf("probes sent at %v, want %v", got, want)
		}
		checkEdges(t, h, []edge{
			{StatusChanged, 0.02, qualify.NonQualified, qualify.Reachable, 0, 30},
			{ProbeFailed, 93, qualify.Reachable, qualify.Reachable, 1, 95},
			{FailuresCleared, 95.02, qualify.Reachable, qualify.Reachable, 0, 125},
		})
		c := h.e.Contacts()[0]
		if c.Status != qualify.Reachable || c.Failures != 0 || !c.Routable || c.NextProbe.Sub(h.t0) != 155*time.Second {
			t.Fatalf("contact after the answered retry: %+v", c)
		}
	})
}

func TestAsteriskDefaultsFlap(t *testing.T) {
	// qualify_frequency=30 alone: one lost probe makes the contact
	// Unreachable, the next success Reachable, every probe send to send.
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			return reply{Silent: at == 30*time.Second, After: 5 * time.Millisecond}
		})
		p := qualify.DefaultPolicy()
		p.Frequency = 30 * time.Second
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: &p})
		h.until(91 * time.Second)
		if got, want := h.prober.sentTo(trunk), durations(0, 30, 60, 90); !slices.Equal(got, want) {
			t.Fatalf("probes sent at %v, want %v", got, want)
		}
		checkEdges(t, h, []edge{
			{StatusChanged, 0.005, qualify.NonQualified, qualify.Reachable, 0, 30},
			{StatusChanged, 33, qualify.Reachable, qualify.Unreachable, 1, 60},
			{AvailabilityChanged, 33, 0, 0, 0, 0},
			{StatusChanged, 60.005, qualify.Unreachable, qualify.Reachable, 0, 90},
			{AvailabilityChanged, 60.005, 0, 0, 0, 0},
		})
	})
}

// TestRecoveryThresholdAndDownInterval: M successes to recover, D between
// probes while down (qualify-semantics §5, §7).
func TestRecoveryThresholdAndDownInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Dead from 0 to 20 s, then answering.
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			return reply{Silent: at < 20*time.Second, After: 10 * time.Millisecond}
		})
		p := qualify.Policy{Frequency: 60 * time.Second, Timeout: time.Second, Failures: 2,
			RetryInterval: time.Second, DownInterval: 5 * time.Second, Successes: 3}
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(30 * time.Second)
		// 0 fail(1/2) at 1, retry 2 fail at 3 -> Unreachable, down every 5 s
		// after the end: 8, 14, 20 (answered), recovering every 1 s: 21.01,
		// 22.02 -> Reachable, then F send to send: 82.02.
		want := durations(0, 2, 8, 14, 20, 21.01, 22.02)
		if got := h.prober.sentTo(trunk); !slices.Equal(got, want) {
			t.Fatalf("probes sent at %v, want %v", got, want)
		}
		changes := h.eventsOf(StatusChanged)
		if len(changes) != 2 || changes[0].Time.Sub(h.t0) != 3*time.Second || changes[1].Time.Sub(h.t0) != secs(22.03) {
			t.Fatalf("status changes %+v", changes)
		}
		if got := h.eventsOf(RecoveryProgress); len(got) != 2 || got[1].Successes != 2 || got[1].SuccessThreshold != 3 {
			t.Fatalf("recovery progress events %+v", got)
		}
		if c := h.e.Contacts()[0]; c.NextProbe.Sub(h.t0) != secs(82.02) {
			t.Fatalf("next probe at %v, want 82.02s", c.NextProbe.Sub(h.t0))
		}
	})
}

// TestLatencyOnlyStaysRoutable: qualify_latency_only keeps the contact
// routable (qualify-semantics §6).
func TestLatencyOnlyStaysRoutable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(10*time.Second))
		p := referencePolicy()
		p.LatencyOnly = true
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(50 * time.Second)
		changes := h.eventsOf(StatusChanged)
		if len(changes) != 2 || changes[1].To != qualify.Unreachable || !changes[1].Routable || !changes[1].LatencyOnly {
			t.Fatalf("status changes %+v", changes)
		}
		if got := h.eventsOf(AvailabilityChanged); len(got) != 0 {
			t.Fatalf("latency-only contact changed availability: %+v", got)
		}
		if a, _ := h.e.AoR("a"); !a.Available || !a.Contacts[0].Routable {
			t.Fatalf("AoR %+v", a)
		}
	})
}

// TestOnly2xx: qualify_2xx_only makes a non-2xx answer a failure (qualify-
// semantics §4).
func TestOnly2xx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(uri string, _ time.Duration) reply {
			return reply{After: time.Millisecond, Code: 503}
		})
		p := qualify.Policy{Frequency: 10 * time.Second, Timeout: time.Second, Only2xx: true}
		q := qualify.Policy{Frequency: 10 * time.Second, Timeout: time.Second}
		h.apply(AoR{Name: "strict", Contacts: []string{"sip:a@x"}, Policy: &p},
			AoR{Name: "lenient", Contacts: []string{"sip:b@x"}, Policy: &q})
		h.until(time.Second)
		for _, c := range h.e.Contacts() {
			want := map[string]qualify.Status{"strict": qualify.Unreachable, "lenient": qualify.Reachable}[c.AoR]
			if c.Status != want {
				t.Errorf("%s: %v, want %v", c.AoR, c.Status, want)
			}
			if c.AoR == "strict" && (c.Last.Reason != qualify.ReasonStatus || c.Last.Code != 503) {
				t.Errorf("strict last result %+v", c.Last)
			}
		}
	})
}

// TestManualQualify: a manual qualify probes at once and the schedule
// continues from it (qualify-semantics §8).
func TestManualQualify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, answersUntil(time.Hour))
		off := qualify.DefaultPolicy()
		h.apply(AoR{Name: "on", Contacts: []string{"sip:on@x"}, Policy: new(referencePolicy())},
			AoR{Name: "off", Contacts: []string{"sip:off@x"}, Policy: &off})
		h.until(10 * time.Second)
		res, err := h.e.Qualify(t.Context(), "on")
		if err != nil || len(res) != 1 || !res[0].OK || res[0].Result.RTT != 10*time.Millisecond {
			t.Fatalf("Qualify(on) = %+v, %v", res, err)
		}
		// The schedule continues from the manual probe: F after its send.
		h.until(41 * time.Second)
		if got, want := h.prober.sentTo("sip:on@x"), durations(0, 10, 40); !slices.Equal(got, want) {
			t.Fatalf("probes sent at %v, want %v", got, want)
		}
		// Qualify off: the probe is reported, no status changes, nothing scheduled.
		res, err = h.e.Qualify(t.Context(), "off")
		if err != nil || len(res) != 1 || !res[0].OK || res[0].Status != qualify.NonQualified {
			t.Fatalf("Qualify(off) = %+v, %v", res, err)
		}
		if c, _ := h.e.AoR("off"); c.Contacts[0].Status != qualify.NonQualified || !c.Contacts[0].NextProbe.IsZero() {
			t.Fatalf("qualify-off contact after a manual probe: %+v", c.Contacts[0])
		}
		if _, err := h.e.Qualify(t.Context(), "nope"); !errors.Is(err, ErrUnknownAoR) {
			t.Fatalf("unknown AoR: %v", err)
		}
	})
}

// TestManualQualifyJoinsProbeInFlight: a manual qualify of a contact whose
// probe is in flight reports that probe (qualify-semantics §8).
func TestManualQualifyJoinsProbeInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(string, time.Duration) reply { return reply{Silent: true} })
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(time.Second) // the first probe is in flight until 3 s
		res, err := h.e.Qualify(t.Context(), "a")
		if err != nil || len(res) != 1 || res[0].Reason != qualify.ReasonTimeout {
			t.Fatalf("Qualify = %+v, %v", res, err)
		}
		if got := time.Since(h.t0); got != 3*time.Second {
			t.Fatalf("manual qualify answered at %v, want the in-flight probe's end at 3s", got)
		}
		if got := h.prober.sentTo(trunk); len(got) != 1 {
			t.Fatalf("a second probe was sent while one was in flight: %v", got)
		}
	})
}

// TestFirstProbeDelay: the first probe is delayed at random within
// max_initial_qualify_time (qualify-semantics §7).
func TestFirstProbeDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{MaxInitialQualifyTime: 10 * time.Second, Rand: func() float64 { return 0.5 }}
		h := newHarness(t, cfg, answersUntil(time.Hour))
		p := qualify.Policy{Frequency: 60 * time.Second, Timeout: time.Second}
		q := qualify.Policy{Frequency: 4 * time.Second, Timeout: time.Second}
		h.apply(AoR{Name: "a", Contacts: []string{"sip:a@x"}, Policy: &p}, AoR{Name: "b", Contacts: []string{"sip:b@x"}, Policy: &q})
		h.until(5 * time.Second)
		if got := h.prober.sentTo("sip:a@x"); !slices.Equal(got, durations(5)) {
			t.Fatalf("a: first probe at %v, want 5s (half of max_initial_qualify_time)", got)
		}
		if got := h.prober.sentTo("sip:b@x"); !slices.Equal(got, durations(2)) {
			t.Fatalf("b: first probe at %v, want 2s (half of F)", got)
		}
	})
}

func TestSlowSubscriberNeverBlocksProbing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(_ string, at time.Duration) reply {
			return reply{Silent: (at/time.Second)%2 == 1, After: time.Millisecond}
		})
		slow := h.e.Subscribe(1) // never read
		p := qualify.Policy{Frequency: time.Second, Timeout: 500 * time.Millisecond}
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: &p})
		h.until(secs(99.5))
		if got := len(h.prober.sentTo(trunk)); got != 100 {
			t.Fatalf("%d probes in 100 s, want 100", got)
		}
		if slow.Dropped() == 0 {
			t.Fatal("a full subscriber dropped nothing")
		}
		n := len(h.eventsOf(0))
		if uint64(n) != slow.Dropped()+1 {
			t.Fatalf("the full subscriber got 1 + %d dropped, the other %d", slow.Dropped(), n)
		}
		slow.Close()
		slow.Close()
		buffered := 0
		for range slow.C { // ends only once C is closed
			buffered++
		}
		if buffered != 1 {
			t.Fatalf("closed subscription held %d events, want its 1 buffered", buffered)
		}
	})
}

func TestShutdownDropsLateResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, func(string, time.Duration) reply { return reply{Silent: true} })
		h.apply(AoR{Name: "a", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		h.until(time.Second)
		h.stop()
		if got := time.Since(h.t0); got != time.Second {
			t.Fatalf("shutdown waited until %v", got)
		}
		if c := h.e.Contacts()[0]; c.Status != qualify.NonQualified || c.Failures != 0 {
			t.Fatalf("a cancelled probe was applied: %+v", c)
		}
	})
}

func TestApplyRejectsInvalidSets(t *testing.T) {
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		aors []AoR
		want string
	}{
		{[]AoR{{Name: ""}}, "invalid AoR set: AoR #1 has no name"},
		{[]AoR{{Name: "a"}, {Name: "a"}}, `invalid AoR set: AoR "a" defined twice`},
		{[]AoR{{Name: "a", Contacts: []string{"sip:x", "sip:x"}}}, `invalid AoR set: AoR "a": contact "sip:x" listed twice`},
		{[]AoR{{Name: "a", Contacts: []string{""}}}, `invalid AoR set: AoR "a": empty contact URI`},
		{[]AoR{{Name: "a", Policy: &qualify.Policy{Failures: -1}}}, `invalid AoR set: AoR "a": invalid qualify policy: qualify_failures must be at least 1, got -1`},
	} {
		if err := e.Apply(tc.aors); err == nil || err.Error() != tc.want || !errors.Is(err, ErrConfig) {
			t.Errorf("Apply(%+v) = %v, want %q", tc.aors, err, tc.want)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrNoProber) {
		t.Fatalf("New without prober: %v", err)
	}
}
