package qualify

import (
	"testing"
	"time"
)

func TestJudgeCall(t *testing.T) {
	p := reference()
	listed := reference()
	listed.CallFailureCodes, _ = ParseCodes("500-503,408")
	for _, c := range []struct {
		name string
		p    *Policy
		r    Result
		want Call
	}{
		{"answered", p, Result{Code: 200}, CallAlive},
		{"busy", p, Result{Code: 486}, CallAlive},
		{"not found", p, Result{Code: 404}, CallAlive},
		{"timeout", p, Result{Reason: ReasonTimeout}, CallSuspect},
		{"transport", p, Result{Reason: ReasonTransport}, CallSuspect},
		{"no final response", p, Result{}, CallSuspect},
		{"503", p, Result{Code: 503}, CallSuspect},
		{"503 retry-after", p, Result{Code: 503, RetryAfter: 20 * time.Second}, CallDrain},
		{"500 by default", p, Result{Code: 500}, CallAlive},
		{"500 listed", listed, Result{Code: 500}, CallSuspect},
		{"503 listed, retry-after", listed, Result{Code: 503, RetryAfter: time.Second}, CallDrain},
		{"486 listed", listed, Result{Code: 486}, CallAlive},
		{"qualify off", &Policy{}, Result{Reason: ReasonTimeout}, CallNone},
	} {
		if got := c.p.JudgeCall(c.r); got != c.want {
			t.Errorf("%s: JudgeCall = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDrainProbe checks §11.4 with a probe: a 503 with Retry-After: 20 to
// an OPTIONS of a suspect contact ends its run, takes it out of routing
// and schedules the next probe 20 s later; the probe then decides.
func TestDrainProbe(t *testing.T) {
	p := reference()
	s := p.Observe(State{}, at(0.01), ok(0)).State
	s = p.Observe(s, at(33), timeout(30)).State
	if s.Failures != 1 {
		t.Fatalf("failures %d, want 1", s.Failures)
	}
	st := p.Observe(s, at(35.01), Result{Sent: at(35), Code: 503, RetryAfter: 20 * time.Second})
	if st.Reason != ReasonDraining || st.OK || !st.State.Draining || st.State.Failures != 0 || st.State.Status != Reachable {
		t.Fatalf("drain step %+v", st)
	}
	if st.State.Phase() != Draining || p.RoutableState(st.State) || !p.Routable(st.State.Status) {
		t.Errorf("phase %v, routable %v: want draining, out of routing", st.State.Phase(), p.RoutableState(st.State))
	}
	if want := at(55.01); !st.Next.Equal(want) {
		t.Errorf("next %v, want the drain's end %v", st.Next.Sub(t0), want.Sub(t0))
	}
	end := p.Observe(st.State, at(55.02), ok(55.01))
	if end.State.Draining || end.State.Status != Reachable || !p.RoutableState(end.State) || end.Changed() {
		t.Errorf("after the drain: %+v", end)
	}
	lat := reference()
	lat.LatencyOnly = true
	if !lat.RoutableState(st.State) {
		t.Error("latency-only: a draining contact must stay routable")
	}
}

func TestDrainBounds(t *testing.T) {
	p := reference()
	for _, c := range []struct {
		max, ra, want time.Duration
	}{
		{0, 20 * time.Second, 20 * time.Second},
		{0, time.Hour, DefaultDrainMax},
		{10 * time.Second, 20 * time.Second, 10 * time.Second},
	} {
		p.DrainMax = c.max
		if got := p.Drain(State{Status: Reachable}, t0, c.ra).Next.Sub(t0); got != c.want {
			t.Errorf("DrainMax %v, Retry-After %v: drains %v, want %v", c.max, c.ra, got, c.want)
		}
	}
	down := p.Drain(State{Status: Unreachable, Failures: 3, Successes: 1}, t0, time.Minute).State
	if down.Status != Unreachable || down.Failures != 3 || down.Successes != 0 || !down.Draining {
		t.Errorf("an Unreachable contact drains as %+v, want still Unreachable, N kept", down)
	}
	if st := (&Policy{}).Drain(State{}, t0, time.Minute); st.State.Draining || !st.Next.IsZero() {
		t.Errorf("qualify off: %+v", st)
	}
}

func TestPull(t *testing.T) {
	p := reference() // R = 2 s
	healthy := State{Status: Reachable}
	for _, c := range []struct {
		name           string
		s              State
		last, due, now float64
		want           float64
	}{
		{"long after the last probe", healthy, 0, 30, 10, 10},
		{"within R of the last probe", healthy, 9, 39, 10, 11},
		{"never probed", State{}, -1, 5, 1, 1},
		{"due before R", healthy, 9, 10.5, 10, 10.5},
		{"suspect keeps its retry", State{Status: Reachable, Failures: 1}, 9, 11, 9.5, 11},
		{"down keeps its backoff", State{Status: Unreachable, Failures: 3}, 0, 30, 10, 30},
		{"draining keeps its end", State{Status: Reachable, Draining: true}, 0, 20, 10, 20},
	} {
		last := time.Time{}
		if c.last >= 0 {
			last = at(c.last)
		}
		if got := p.Pull(c.s, last, at(c.due), at(c.now)); !got.Equal(at(c.want)) {
			t.Errorf("%s: Pull = %v, want %vs", c.name, got.Sub(t0), c.want)
		}
	}
}

func TestQuiet(t *testing.T) {
	p := reference()
	p.QuietOnly = true
	healthy := State{Status: Reachable}
	for _, c := range []struct {
		name  string
		p     *Policy
		s     State
		alive float64
		skip  bool
	}{
		{"answered within F", p, healthy, 5, true},
		{"answered F ago", p, healthy, 0, false},
		{"no call", p, healthy, -1, false},
		{"option off", reference(), healthy, 5, false},
		{"suspect", p, State{Status: Reachable, Failures: 1}, 5, false},
		{"unreachable", p, State{Status: Unreachable, Failures: 3}, 5, false},
		{"draining", p, State{Status: Reachable, Draining: true}, 5, false},
		{"never qualified", p, State{}, 5, false},
	} {
		alive := time.Time{}
		if c.alive >= 0 {
			alive = at(c.alive)
		}
		next, skip := c.p.Quiet(c.s, alive, at(30))
		if skip != c.skip || (skip && !next.Equal(alive.Add(30*time.Second))) {
			t.Errorf("%s: Quiet = %v, %v; want skip %v until F after the call", c.name, next.Sub(t0), skip, c.skip)
		}
	}
}

func TestPullGap(t *testing.T) {
	for _, c := range []struct {
		r, t, want time.Duration
	}{
		{2 * time.Second, 3 * time.Second, 2 * time.Second},
		{10 * time.Second, 3 * time.Second, 3 * time.Second},
		{0, 3 * time.Second, 3 * time.Second},
		{0, 0, SIPTransactionTimeout},
	} {
		p := Policy{Frequency: 60 * time.Second, RetryInterval: c.r, Timeout: c.t}
		if got := p.PullGap(); got != c.want {
			t.Errorf("R %v T %v: PullGap %v, want %v", c.r, c.t, got, c.want)
		}
	}
}
