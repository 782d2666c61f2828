package qualify

import (
	"math/rand/v2"
	"testing"
	"time"
)

// model is a deliberately plain transcription of the contract, used as the
// oracle for random sequences.
type model struct {
	status           Status
	fails, successes int
	downFails        int       // failures while Unreachable, since it became so
	runStart         time.Time // end of the run's first failure
}

func (m *model) apply(p *Policy, success bool, end time.Time) {
	n, k := max(p.Failures, 1), max(p.Successes, 1)
	if success {
		m.fails = 0
		if m.status == Unreachable {
			m.successes++
			if m.successes >= k {
				m.status, m.successes, m.downFails = Reachable, 0, 0
			}
		} else {
			m.status = Reachable
		}
		return
	}
	m.successes = 0
	if m.status == Unreachable {
		m.downFails++
	}
	if m.status != Unreachable {
		if m.fails == 0 {
			m.runStart = end
		}
		m.fails++
		if m.fails >= n && end.Sub(m.runStart) >= p.FailureWindow {
			m.status, m.downFails = Unreachable, 0
		}
	}
}

func (m *model) next(p *Policy, sent, end time.Time) time.Time {
	sendToSend := func() time.Time {
		if t := sent.Add(p.Frequency); t.After(end) {
			return t
		}
		return end
	}
	var d time.Duration
	switch {
	case m.status != Unreachable && m.fails == 0:
		return sendToSend()
	case m.status != Unreachable:
		d = p.RetryInterval
	case m.successes == 0 && p.DownInterval > 0:
		d = p.DownInterval
	case m.successes == 0 && p.RetryInterval > 0:
		// The backoff: R doubled at each failure while down, up to F (or R).
		d = p.RetryInterval
		for range m.downFails {
			d = min(2*d, max(p.Frequency, p.RetryInterval))
		}
	default:
		d = p.RetryInterval
	}
	if d == 0 {
		return sendToSend()
	}
	return end.Add(d)
}

func randomPolicy(r *rand.Rand) *Policy {
	secs := func(max int) time.Duration { return time.Duration(r.IntN(max*10)) * 100 * time.Millisecond }
	p := &Policy{
		Frequency:     time.Duration(1+r.IntN(60)) * time.Second,
		Timeout:       secs(5),
		Failures:      r.IntN(5),
		Successes:     r.IntN(4),
		RetryInterval: secs(3) * time.Duration(r.IntN(2)),
		DownInterval:  secs(8) * time.Duration(r.IntN(2)),
		Only2xx:       r.IntN(2) == 0,
		LatencyOnly:   r.IntN(4) == 0,
		FailureWindow: secs(20) * time.Duration(r.IntN(2)),
	}
	if !p.Only2xx && r.IntN(2) == 0 {
		p.SuccessCodes, _ = ParseCodes("200-299,404")
	}
	return p
}

// accepts is the model's reading of qualify-semantics §4.
func accepts(p *Policy, code int) bool {
	switch {
	case !p.SuccessCodes.Empty():
		return code >= 200 && code < 300 || code == 404
	case p.Only2xx:
		return code < 300
	}
	return true
}

func randomResult(r *rand.Rand, sent time.Time, p *Policy) (Result, time.Time, bool) {
	switch r.IntN(4) {
	case 0:
		return Result{Sent: sent, Reason: ReasonTimeout}, sent.Add(p.ProbeTimeout()), false
	case 1:
		codes := []int{200, 202, 401, 404, 503}
		c := codes[r.IntN(len(codes))]
		rtt := time.Duration(r.IntN(200)) * time.Millisecond
		return Result{Sent: sent, Code: c, RTT: rtt}, sent.Add(rtt), accepts(p, c)
	case 2:
		return Result{Reason: ReasonTransport}, sent, false
	}
	rtt := time.Duration(r.IntN(50)) * time.Millisecond
	return Result{Sent: sent, Code: 200, RTT: rtt}, sent.Add(rtt), true
}

// TestObserveMatchesModel checks Observe against an independent model of qualify-semantics §4,
// §5 and §7 (success codes and the failure window included) over random sequences of results.
func TestObserveMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 2000 {
		p := randomPolicy(r)
		var s State
		var m model
		now := t0
		for i := range 60 {
			res, end, success := randomResult(r, now, p)
			st := p.Observe(s, end, res)
			m.apply(p, success, end)
			want := m.next(p, now, end)
			if st.OK != success || st.State.Status != m.status || int(st.State.Failures) != m.fails ||
				int(st.State.Successes) != m.successes || !st.Next.Equal(want) {
				t.Fatalf("run %d step %d policy %+v: got %+v, model %+v next %v", run, i, *p, st, m, want.Sub(now))
			}
			if st.Changed() != (st.From != m.status) || !st.Next.After(now) && !st.Next.Equal(end) {
				t.Fatalf("run %d step %d: inconsistent step %+v", run, i, st)
			}
			s, now = st.State, st.Next
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	p := reference()
	var s State
	res := [2]Result{ok(0), timeout(0)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st := p.Observe(s, at(1), res[(i>>2)&1])
		s = st.State
	}
}
