package qualify

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func ok(sent float64) Result { return Result{Sent: at(sent), Code: 200, RTT: time.Millisecond} }

func timeout(sent float64) Result { return Result{Sent: at(sent), Reason: ReasonTimeout} }

// reference is the spec's policy: F=30, T=3, N=3, R=2.
func reference() *Policy {
	return &Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second}
}

// probe is one step of a scripted timeline: a result sent at sent and
// observed at end, and what must follow.
type probe struct {
	sent, end float64
	res       Result
	status    Status
	failures  uint32
	next      float64
}

func runTimeline(t *testing.T, p *Policy, steps []probe) {
	t.Helper()
	var s State
	for i, pr := range steps {
		st := p.Observe(s, at(pr.end), pr.res)
		s = st.State
		if s.Status != pr.status || s.Failures != pr.failures {
			t.Fatalf("step %d (sent %vs): state %+v, want status %v failures %d", i, pr.sent, s, pr.status, pr.failures)
		}
		if want := at(pr.next); !st.Next.Equal(want) {
			t.Fatalf("step %d (sent %vs): next %v, want %vs", i, pr.sent, st.Next.Sub(t0), pr.next)
		}
	}
}

// TestReferenceTimelineGoesDown checks the reference timeline of qualify-semantics §9: three
// timeouts R apart make the contact Unreachable at 103 s, then probes back off from R, doubling
// at each failure, to F.
func TestReferenceTimelineGoesDown(t *testing.T) {
	runTimeline(t, reference(), []probe{
		{0, 0.01, ok(0), Reachable, 0, 30},
		{30, 30.01, ok(30), Reachable, 0, 60},
		{60, 60.01, ok(60), Reachable, 0, 90},
		{90, 93, timeout(90), Reachable, 1, 95},
		{95, 98, timeout(95), Reachable, 2, 100},
		{100, 103, timeout(100), Unreachable, 3, 105},
		{105, 108, timeout(105), Unreachable, 3, 112},
		{112, 115, timeout(112), Unreachable, 3, 123},
		{123, 126, timeout(123), Unreachable, 3, 142},
		{142, 145, timeout(142), Unreachable, 3, 175},
		{175, 178, timeout(175), Unreachable, 3, 208},
		{208, 208.01, ok(208), Reachable, 0, 238},
	})
}

// TestReferenceTimelineRetryAnswered checks qualify-semantics §9: an answered retry resets the
// counter, the contact never leaves Reachable, and the next probe is F after the retry's send.
func TestReferenceTimelineRetryAnswered(t *testing.T) {
	runTimeline(t, reference(), []probe{
		{60, 60.01, ok(60), Reachable, 0, 90},
		{90, 93, timeout(90), Reachable, 1, 95},
		{95, 95.02, ok(95), Reachable, 0, 125},
	})
}

// TestAsteriskDefaults checks that, with none of the new options, one failure makes a contact
// Unreachable and probes keep F's send-to-send rhythm, as Asterisk (qualify-semantics §5, §7).
func TestAsteriskDefaults(t *testing.T) {
	p := DefaultPolicy()
	p.Frequency = 30 * time.Second
	runTimeline(t, &p, []probe{
		{0, 0.01, ok(0), Reachable, 0, 30},
		// One failure: Unreachable at once, next probe still send to send.
		{30, 33, timeout(30), Unreachable, 1, 60},
		{60, 63, timeout(60), Unreachable, 1, 90},
		// One success: Reachable at once.
		{90, 90.5, ok(90), Reachable, 0, 120},
	})
}

// TestNeverBeforeProbeEnded checks qualify-semantics §7: a probe is never due before the
// previous one ended, even when F is shorter than the probe.
func TestNeverBeforeProbeEnded(t *testing.T) {
	// T > F: the next probe may not start before the previous one ended.
	p := &Policy{Frequency: 10 * time.Second, Timeout: 0}
	st := p.Observe(State{}, at(32), timeout(0))
	if !st.Next.Equal(at(32)) {
		t.Fatalf("next %v, want 32s", st.Next.Sub(t0))
	}
}

// TestRecoveryThresholdAndDownInterval checks qualify-semantics §5 and §7: M successes bring an
// Unreachable contact back, D apart until the first success, R apart while recovering.
func TestRecoveryThresholdAndDownInterval(t *testing.T) {
	p := &Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 2,
		RetryInterval: 2 * time.Second, DownInterval: 10 * time.Second, Successes: 3}
	runTimeline(t, p, []probe{
		{0, 3, timeout(0), NonQualified, 1, 5},
		{5, 8, timeout(5), Unreachable, 2, 18},
		{18, 21, timeout(18), Unreachable, 2, 31},
		{31, 31.1, ok(31), Unreachable, 0, 33.1},
		{33.1, 33.2, ok(33.1), Unreachable, 0, 35.2},
		// A failure while recovering resets successes: back to D.
		{35.2, 38.2, timeout(35.2), Unreachable, 0, 48.2},
		{48.2, 48.3, ok(48.2), Unreachable, 0, 50.3},
		{50.3, 50.4, ok(50.3), Unreachable, 0, 52.4},
		{52.4, 52.5, ok(52.4), Reachable, 0, 82.4},
	})
}

// TestDownIntervalFallsBackToF checks qualify-semantics §7: without R and D, the intervals
// while down fall back to F with its send-to-send rhythm.
func TestDownIntervalFallsBackToF(t *testing.T) {
	// Neither R nor D: F send to send while down, as Asterisk.
	p := &Policy{Frequency: 20 * time.Second, Timeout: 3 * time.Second, Failures: 2, Successes: 2}
	runTimeline(t, p, []probe{
		{0, 3, timeout(0), NonQualified, 1, 20},
		{20, 23, timeout(20), Unreachable, 2, 40},
		{40, 40.1, ok(40), Unreachable, 0, 60},
		{60, 60.1, ok(60), Reachable, 0, 80},
	})
}

// TestOnly2xx checks qualify-semantics §4: with qualify_2xx_only a non-2xx final response is a
// failure with reason "status CODE".
func TestOnly2xx(t *testing.T) {
	res := Result{Sent: at(0), Code: 503}
	for _, tc := range []struct {
		only2xx bool
		ok      bool
		reason  Reason
	}{{false, true, ReasonNone}, {true, false, ReasonStatus}} {
		p := &Policy{Frequency: time.Minute, Only2xx: tc.only2xx}
		st := p.Observe(State{}, at(0.1), res)
		if st.OK != tc.ok || st.Reason != tc.reason {
			t.Errorf("only2xx=%v: ok=%v reason=%v, want %v %v", tc.only2xx, st.OK, st.Reason, tc.ok, tc.reason)
		}
	}
	// A 401 without credentials proves the peer is there.
	p := &Policy{Frequency: time.Minute}
	if st := p.Observe(State{}, at(1), Result{Sent: at(0), Code: 401}); !st.OK {
		t.Errorf("401 is not a success")
	}
}

// TestLatencyOnlyKeepsRoutable checks qualify-semantics §6: a latency-only contact goes
// Unreachable as usual but stays routable.
func TestLatencyOnlyKeepsRoutable(t *testing.T) {
	p := &Policy{Frequency: time.Minute, LatencyOnly: true}
	st := p.Observe(State{Status: Reachable}, at(3), timeout(0))
	if st.State.Status != Unreachable || !st.Changed() {
		t.Fatalf("latency-only must still change status: %+v", st)
	}
	if !p.Routable(st.State.Status) {
		t.Fatal("latency-only Unreachable contact is not routable")
	}
	strict := &Policy{Frequency: time.Minute}
	if strict.Routable(Unreachable) || strict.Routable(Removed) || !strict.Routable(NonQualified) {
		t.Fatal("routable rule broken")
	}
}

// TestQualifyOffChangesNothing checks qualify-semantics §5 and §8: with qualify off, a manual
// probe reports its result and changes no status.
func TestQualifyOffChangesNothing(t *testing.T) {
	p := &Policy{}
	st := p.Observe(State{}, at(1), timeout(0))
	if st.Changed() || st.State != (State{}) || !st.Next.IsZero() || st.OK || st.Reason != ReasonTimeout {
		t.Fatalf("qualify off: %+v", st)
	}
}

// TestValidate checks the ranges of qualify-semantics §2, as Policy.Validate enforces them.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{Frequency: -time.Second}, "invalid qualify policy: qualify_frequency must be between 0 and 86400 seconds, got -1s"},
		{Policy{Frequency: 86401 * time.Second}, "invalid qualify policy: qualify_frequency must be between 0 and 86400 seconds, got 24h0m1s"},
		{Policy{Frequency: 1500 * time.Millisecond}, "invalid qualify policy: qualify_frequency must be whole seconds, got 1.5s"},
		{Policy{Failures: -1}, "invalid qualify policy: qualify_failures must be at least 1, got -1"},
		{Policy{Successes: -2}, "invalid qualify policy: qualify_successes must be at least 1, got -2"},
		{Policy{RetryInterval: -1}, "invalid qualify policy: qualify_retry_interval must be between 0 and 86400 seconds, got -1ns"},
		{Policy{DownInterval: 90000 * time.Second}, "invalid qualify policy: qualify_down_interval must be between 0 and 86400 seconds, got 25h0m0s"},
		{Policy{Timeout: 90000 * time.Second}, "invalid qualify policy: qualify_timeout must be at most 86400 seconds, got 25h0m0s"},
	} {
		err := tc.p.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: got %v, want %q", tc.p, err, tc.want)
		}
	}
	for _, p := range []Policy{{}, DefaultPolicy(), *reference()} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// TestFirstDelay checks qualify-semantics §7 (max_initial_qualify_time, §2): the first probe is
// delayed within [0, min(F, limit)).
func TestFirstDelay(t *testing.T) {
	p := &Policy{Frequency: 60 * time.Second}
	for _, tc := range []struct {
		max  time.Duration
		u    float64
		want time.Duration
	}{{0, 0.5, 30 * time.Second}, {10 * time.Second, 0.5, 5 * time.Second}, {120 * time.Second, 0.25, 15 * time.Second}, {0, 0, 0}} {
		if got := p.FirstDelay(tc.max, tc.u); got != tc.want {
			t.Errorf("FirstDelay(%v, %v) = %v, want %v", tc.max, tc.u, got, tc.want)
		}
	}
}

// TestLabels checks the status labels of qualify-semantics §1 and §5, as Asterisk prints them.
func TestLabels(t *testing.T) {
	if Unreachable.String() != "Unreachable" || NonQualified.String() != "NonQualified" || Status(9).String() != "Status(9)" {
		t.Fatal("status labels")
	}
	if s, ok := ParseStatus("Reachable"); !ok || s != Reachable {
		t.Fatal("ParseStatus")
	}
	if ReasonDNS.String() != "dns" || Recovering.String() != "recovering" {
		t.Fatal("reason/phase labels")
	}
}

// TestEffective checks the effective intervals of qualify-semantics §2: R falls back to F, D to
// R then F, T <= 0 to 32 s.
func TestEffective(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want Settings
	}{
		{Policy{}, Settings{Timeout: SIPTransactionTimeout, Failures: 1, Successes: 1}},
		{Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second}, Settings{Frequency: 30 * time.Second, Timeout: 3 * time.Second,
			Failures: 1, RetryInterval: 30 * time.Second, DownInterval: 30 * time.Second, Successes: 1}},
		{*reference(), Settings{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3,
			RetryInterval: 2 * time.Second, DownInterval: 30 * time.Second, DownBackoff: true, Successes: 1}},
		{Policy{Frequency: 30 * time.Second, RetryInterval: 40 * time.Second}, Settings{Frequency: 30 * time.Second,
			Timeout: SIPTransactionTimeout, Failures: 1, RetryInterval: 40 * time.Second, DownInterval: 40 * time.Second,
			DownBackoff: true, Successes: 1}},
		{Policy{Frequency: time.Minute, DownInterval: 10 * time.Second, Successes: 2, Only2xx: true, LatencyOnly: true},
			Settings{Frequency: time.Minute, Timeout: SIPTransactionTimeout, Failures: 1, RetryInterval: time.Minute,
				DownInterval: 10 * time.Second, Successes: 2, Only2xx: true, LatencyOnly: true}},
	} {
		if got := tc.p.Effective(); got != tc.want {
			t.Errorf("%+v: got %+v, want %+v", tc.p, got, tc.want)
		}
	}
}

// TestReport checks the report of a policy's settings, with every fallback of qualify-semantics
// §2 resolved.
func TestReport(t *testing.T) {
	p := Policy{Frequency: 30 * time.Second, Timeout: 2500 * time.Millisecond, Failures: 3, RetryInterval: 1500 * time.Millisecond, Only2xx: true}
	want := Report{Frequency: 30, Timeout: 2.5, Failures: 3, RetryInterval: 1.5, DownInterval: 30, DownBackoff: true, Successes: 1, Only2xx: true}
	if got := p.Report(); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestDownBackoff checks the down backoff of qualify-semantics §7: R doubled at each failed
// probe of a down contact up to max(F, R); a fixed D, or no R, has none; the counter stops
// where the backoff ends, so a dead contact's state stops changing.
func TestDownBackoff(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	for _, tc := range []struct {
		p    Policy
		want []time.Duration // DownStep(0), DownStep(1), ...
	}{
		{*reference(), []time.Duration{sec(2), sec(4), sec(8), sec(16), sec(30), sec(30)}},
		{Policy{Frequency: 60 * time.Second, RetryInterval: sec(1.5)}, []time.Duration{sec(1.5), sec(3), sec(6), sec(12), sec(24), sec(48), sec(60)}},
		{Policy{Frequency: 10 * time.Second, RetryInterval: sec(40)}, []time.Duration{sec(40), sec(40)}},
		{Policy{Frequency: 30 * time.Second, RetryInterval: sec(2), DownInterval: sec(5)}, []time.Duration{sec(5), sec(5)}},
		{Policy{Frequency: 30 * time.Second}, []time.Duration{0, 0}},
	} {
		p := tc.p
		for k, want := range tc.want {
			if got := p.DownStep(uint8(k)); got != want {
				t.Errorf("%+v: DownStep(%d) = %v, want %v", p, k, got, want)
			}
		}
		s := State{Status: Unreachable, Failures: 1}
		for range 300 {
			s = p.Observe(s, t0, timeout(0)).State
		}
		if end := len(tc.want) - 1; p.DownStep(s.DownProbes) != tc.want[end] || s.DownProbes > uint8(end) {
			t.Errorf("%+v: after 300 failures DownProbes = %d, want at most %d with the last step", p, s.DownProbes, end)
		}
		if s = p.Observe(s, t0, ok(0)).State; s.Status != Reachable || s.DownProbes != 0 {
			t.Errorf("%+v: a success leaves %+v, want Reachable and DownProbes 0", p, s)
		}
	}
}
