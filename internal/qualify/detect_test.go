package qualify

import (
	"testing"
	"time"
)

// TestParseCodes checks the lists of qualify_success_codes (qualify-semantics §2): codes and
// ranges merge into one canonical set, and every malformed list is refused.
func TestParseCodes(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "200-299,404,405", want: "200-299,404-405"},
		{in: " 404 , 200-299 ", want: "200-299,404"},
		{in: "200-250,240-300,301", want: "200-301"},
		{in: "200", want: "200"},
		{in: "200,202,204,206,208,210,212,214", want: "200,202,204,206,208,210,212,214"},
		{in: "200,202,204,206,208,210,212,214,216", err: "invalid status code list: more than 8 separate ranges"},
		{in: "", err: `invalid status code list: "" is not a status code or a range of them`},
		{in: "2xx", err: `invalid status code list: "2xx" is not a status code or a range of them`},
		{in: "200,,404", err: `invalid status code list: "" is not a status code or a range of them`},
		{in: "180", err: "invalid status code list: 180 is not a final response code (200 to 699)"},
		{in: "200-700", err: "invalid status code list: 700 is not a final response code (200 to 699)"},
		{in: "299-200", err: `invalid status code list: range "299-200" is empty`},
		{in: "200-", err: `invalid status code list: "200-" is not a status code or a range of them`},
	} {
		c, err := ParseCodes(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("ParseCodes(%q): error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || c.String() != tc.want):
			t.Errorf("ParseCodes(%q) = %q, %v; want %q", tc.in, c, err, tc.want)
		}
	}
	a, _ := ParseCodes("404,200-299,405")
	b, _ := ParseCodes("200-299,404-405")
	if a != b {
		t.Error("equal sets are not equal values")
	}
}

// TestSuccessCodes checks qualify-semantics §4: with qualify_success_codes, a final response
// outside the set is a failure with reason status, one inside a success.
func TestSuccessCodes(t *testing.T) {
	codes, err := ParseCodes("200-299,404,405")
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{Frequency: time.Minute, SuccessCodes: codes}
	for code, want := range map[int]bool{200: true, 299: true, 404: true, 405: true, 300: false, 401: false, 403: false, 503: false} {
		st := p.Observe(State{}, at(1), Result{Sent: at(0), Code: code})
		if st.OK != want || (st.Reason == ReasonStatus) == want {
			t.Errorf("code %d: ok=%v reason=%v, want ok=%v", code, st.OK, st.Reason, want)
		}
	}
	if st := p.Observe(State{}, at(3), timeout(0)); st.OK || st.Reason != ReasonTimeout {
		t.Errorf("a timeout is still a timeout: %+v", st)
	}
}

// auto is the reference policy with qualify_failures=auto and the defaults of §2.
func auto() *Policy {
	p := reference()
	p.Failures, p.FailuresAuto = 0, true
	return p
}

// TestAutoThreshold checks the rule of qualify-semantics §5.1: the smallest N in [min, max]
// with (86400/F) p^N under the target, p the posterior mean (1 + lost) / (100 + probes).
func TestAutoThreshold(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        Policy
		answered uint32
		lost     uint32
		want     int
	}{
		{"no history", *auto(), 0, 0, 3},
		{"clean link", *auto(), 10000, 10, 2}, // p = 0.11%: 2880 p^2 = 0.0035
		{"1% loss", *auto(), 9900, 100, 3},
		{"5% loss", *auto(), 9500, 500, 5},   // 2880 p^4 = 0.018, p^5 = 0.0009
		{"20% loss", *auto(), 8000, 2000, 8}, // 2880 p^8 = 0.0074
		{"40% loss, capped at max", *auto(), 6000, 4000, 8},
		{"min", Policy{Frequency: 30 * time.Second, FailuresAuto: true, FailuresMin: 4}, 10000, 10, 4},
		{"max", Policy{Frequency: 30 * time.Second, FailuresAuto: true, FailuresMax: 4}, 8000, 2000, 4},
		{"target", Policy{Frequency: 30 * time.Second, FailuresAuto: true, FalseOutagesPerDay: 1}, 9900, 100, 2},
		{"slow F", Policy{Frequency: 900 * time.Second, FailuresAuto: true}, 0, 0, 2},
		{"fixed N ignores history", *reference(), 8000, 2000, 3},
	} {
		s := State{Answered: tc.answered, Lost: tc.lost}
		if got := tc.p.FailureThresholdFor(s); got != tc.want {
			t.Errorf("%s: N = %d, want %d (p = %.4f)", tc.name, got, tc.want, LossEstimate(s))
		}
	}
}

// TestAutoHoldsN checks qualify-semantics §5.1: the run's N is taken at its first failure
// and held to its end, though the estimate would give another; the run's end releases it.
func TestAutoHoldsN(t *testing.T) {
	p := auto()
	s := State{Status: Reachable, Answered: 10000, Lost: 10} // N = 2
	s = p.Observe(s, at(3), timeout(0)).State
	if s.Threshold != 2 || p.FailureThresholdFor(s) != 2 {
		t.Fatalf("held %d, in use %d; want 2", s.Threshold, p.FailureThresholdFor(s))
	}
	s.Lost = 3000 // the estimate now says 8: the run keeps 2
	st := p.Observe(s, at(8), timeout(5))
	if st.State.Status != Unreachable || st.State.Threshold != 2 {
		t.Fatalf("second failure: %+v, want Unreachable at the held N = 2", st.State)
	}
	st = p.Observe(st.State, at(10.1), ok(10))
	if st.State.Status != Reachable || st.State.Threshold != 0 || p.FailureThresholdFor(st.State) != 8 {
		t.Fatalf("after recovery: %+v, N in use %d; want the run released and N = 8", st.State, p.FailureThresholdFor(st.State))
	}
}

// TestAutoLearnsOnlyWhileReachable checks qualify-semantics §5.1: successes while Reachable
// and the failures of runs they end are counted; a dead spell, a run that ends Unreachable
// and the probes before the first success are not.
func TestAutoLearnsOnlyWhileReachable(t *testing.T) {
	p := auto()
	var s State
	step := func(sec float64, r Result) {
		s = p.Observe(s, at(sec+1), r).State
	}
	step(0, timeout(0)) // NonQualified: not counted
	step(5, ok(5))      // NonQualified -> Reachable: not counted
	if s.Answered != 0 || s.Lost != 0 {
		t.Fatalf("before Reachable: %+v", s)
	}
	step(35, ok(35))
	step(65, timeout(65))
	step(70, ok(70)) // a run of one failure, ended by a success while Reachable
	if s.Answered != 2 || s.Lost != 1 {
		t.Fatalf("while Reachable: answered %d lost %d, want 2 and 1", s.Answered, s.Lost)
	}
	for i := range 20 { // a death: three failures make it Unreachable, then a dead spell
		step(100+5*float64(i), timeout(100+5*float64(i)))
	}
	step(300, ok(300)) // recovery, Unreachable -> Reachable: not counted
	if s.Status != Reachable || s.Answered != 2 || s.Lost != 1 {
		t.Fatalf("after a death: %+v, want Reachable with answered 2 lost 1", s)
	}
}

// TestAutoForgets checks the horizon of qualify-semantics §5.1: the counts halve when they
// reach it, keeping the estimate.
func TestAutoForgets(t *testing.T) {
	p := auto()
	s := State{Status: Reachable, Answered: lossHorizon - 101, Lost: 100}
	s = p.Observe(s, at(1), ok(0)).State
	if s.Answered != (lossHorizon-100)/2 || s.Lost != 50 {
		t.Fatalf("answered %d lost %d, want %d and 50", s.Answered, s.Lost, (lossHorizon-100)/2)
	}
}

// TestFailureWindow checks qualify-semantics §5 and §7. With qualify_failure_window=20 the
// reference policy's three failures span 10 s, so retries go on at R until the fifth failure,
// 20 s after the first one ended, and a success inside the window ends the run. A window no
// longer than (N-1)(R+T) = 10 s changes nothing.
func TestFailureWindow(t *testing.T) {
	for _, tc := range []struct {
		window float64
		steps  []probe
	}{
		{20, []probe{
			{60, 60.01, ok(60), Reachable, 0, 90},
			{90, 93, timeout(90), Reachable, 1, 95},
			{95, 98, timeout(95), Reachable, 2, 100},
			{100, 103, timeout(100), Reachable, 3, 105},
			{105, 108, timeout(105), Reachable, 4, 110},
			{110, 113, timeout(110), Unreachable, 5, 115},
			{115, 115.01, ok(115), Reachable, 0, 145},
			{145, 148, timeout(145), Reachable, 1, 150},
			{150, 153, timeout(150), Reachable, 2, 155},
			{155, 158, timeout(155), Reachable, 3, 160},
			{160, 160.01, ok(160), Reachable, 0, 190},
		}},
		{10, []probe{
			{90, 93, timeout(90), NonQualified, 1, 95},
			{95, 98, timeout(95), NonQualified, 2, 100},
			{100, 103, timeout(100), Unreachable, 3, 105},
		}},
	} {
		p := reference()
		p.FailureWindow = time.Duration(tc.window * float64(time.Second))
		runTimeline(t, p, tc.steps)
	}
}

// TestValidateNew checks the ranges of the options of qualify-semantics §2 that detection
// fitting the link adds.
func TestValidateNew(t *testing.T) {
	codes, _ := ParseCodes("200-299")
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{FailuresAuto: true, FailuresMin: 5, FailuresMax: 4}, "invalid qualify policy: qualify_failures_min must be at most qualify_failures_max (4), got 5"},
		{Policy{FailuresMin: 9}, "invalid qualify policy: qualify_failures_min must be at most qualify_failures_max (8), got 9"},
		{Policy{FalseOutagesPerDay: -1}, "invalid qualify policy: qualify_false_outages_per_day must be more than 0 and at most 86400, got -1"},
		{Policy{FailureWindow: -time.Second}, "invalid qualify policy: qualify_failure_window must be between 0 and 86400 seconds, got -1s"},
		{Policy{Only2xx: true, SuccessCodes: codes}, "invalid qualify policy: qualify_success_codes and qualify_2xx_only=yes are exclusive"},
	} {
		err := tc.p.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: got %v, want %q", tc.p, err, tc.want)
		}
	}
}

// TestReportNew checks the report of the options of qualify-semantics §2, defaults resolved.
func TestReportNew(t *testing.T) {
	codes, _ := ParseCodes("200-299,404")
	p := auto()
	p.FailureWindow, p.SuccessCodes = 20*time.Second, codes
	want := Report{Frequency: 30, Timeout: 3, Failures: 3, RetryInterval: 2, DownInterval: 30, DownBackoff: true, Successes: 1,
		FailuresAuto: true, FailuresMin: 1, FailuresMax: 8, FalseOutagesPerDay: 0.01, FailureWindow: 20, SuccessCodes: "200-299,404"}
	if got := p.Report(); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestWindowAcrossTheWrap checks the run start's arithmetic of qualify-semantics §5: a run
// whose first failure ends just before Unix milliseconds wrap modulo 2^32 still spans its
// window exactly at 20 s.
func TestWindowAcrossTheWrap(t *testing.T) {
	p := reference()
	p.FailureWindow = 20 * time.Second
	wrap := time.UnixMilli(1<<32*400 - 10000).UTC() // 10 s before a wrap
	s := State{Status: Reachable}
	for i, want := range []Status{Reachable, Reachable, Reachable, Reachable, Unreachable} {
		end := wrap.Add(time.Duration(5*i) * time.Second)
		s = p.Observe(s, end, Result{Sent: end.Add(-3 * time.Second), Reason: ReasonTimeout}).State
		if s.Status != want || s.Spanned != (i == 4) {
			t.Fatalf("failure %d, %v after the first: %+v, want %v", i+1, end.Sub(wrap), s, want)
		}
	}
}
