package sipprobe

import (
	"fmt"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// txEvent is one input of a machine in TestMachine.
type txEvent uint8

const (
	evFire    txEvent = iota // the armed timer fires, at its due instant
	evReceive                // a response with code
	evFail                   // a transport error
)

func (e txEvent) String() string { return [...]string{"fire", "receive", "fail"}[e] }

// none is a step's next timer when it arms none.
const none = time.Duration(-1)

// txStep is one event at an instant after the start, and what the
// machine must be and do after it.
type txStep struct {
	ev   txEvent
	at   time.Duration
	code int
	// want: the phase, whether the request is sent, the next timer
	// (since the start, or none), whether a response completed it.
	want   phase
	send   bool
	redial bool
	next   time.Duration
	final  bool
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestMachine feeds the client transaction machine events at explicit
// instants and checks its state, its sends and its next timer after each
// (RFC 3261 section 17.1.2.2; docs/qualify-semantics.md §3.2).
func TestMachine(t *testing.T) {
	cases := []struct {
		name     string
		timeout  time.Duration
		reliable bool
		redial   bool          // the connection was not dialed by the probe
		next     time.Duration // the timer armed at the start
		steps    []txStep
		code     int16
		reason   qualify.Reason
	}{
		{name: "udp silent: Timer E doubles to T2, the deadline ends it", timeout: 10 * time.Second, next: ms(500), steps: []txStep{
			{ev: evFire, at: ms(500), want: phaseTrying, send: true, next: ms(1500)},
			{ev: evFire, at: ms(1500), want: phaseTrying, send: true, next: ms(3500)},
			{ev: evFire, at: ms(3500), want: phaseTrying, send: true, next: ms(7500)},
			{ev: evFire, at: ms(7500), want: phaseTrying, send: true, next: ms(10000)}, // T2, cut at the deadline
			{ev: evFire, at: ms(10000), want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "udp: T2 once doubled", timeout: 20 * time.Second, next: ms(500), steps: []txStep{
			{ev: evFire, at: ms(500), want: phaseTrying, send: true, next: ms(1500)},
			{ev: evFire, at: ms(1500), want: phaseTrying, send: true, next: ms(3500)},
			{ev: evFire, at: ms(3500), want: phaseTrying, send: true, next: ms(7500)},
			{ev: evFire, at: ms(7500), want: phaseTrying, send: true, next: ms(11500)},
			{ev: evFire, at: ms(11500), want: phaseTrying, send: true, next: ms(15500)},
		}},
		{name: "udp: answered in Trying", timeout: 3 * time.Second, next: ms(500), steps: []txStep{
			{ev: evReceive, at: ms(20), code: 200, want: phaseCompleted, next: ms(20) + T4, final: true},
			{ev: evReceive, at: ms(30), code: 200, want: phaseCompleted, next: none}, // a retransmission, absorbed
			{ev: evFire, at: ms(20) + T4, want: phaseTerminated, next: none},         // Timer K
			{ev: evReceive, at: ms(20) + T4, code: 200, want: phaseTerminated, next: none},
		}, code: 200},
		{name: "udp: Proceeding retransmits at T2, the deadline stays", timeout: 10 * time.Second, next: ms(500), steps: []txStep{
			{ev: evFire, at: ms(500), want: phaseTrying, send: true, next: ms(1500)},
			{ev: evReceive, at: ms(600), code: 180, want: phaseProceeding, next: none}, // the armed timer stays
			{ev: evFire, at: ms(1500), want: phaseProceeding, send: true, next: ms(5500)},
			{ev: evReceive, at: ms(2000), code: 100, want: phaseProceeding, next: none},
			{ev: evFire, at: ms(5500), want: phaseProceeding, send: true, next: ms(9500)},
			{ev: evFire, at: ms(9500), want: phaseProceeding, send: true, next: ms(10000)},
			{ev: evFire, at: ms(10000), want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "udp: answered in Proceeding", timeout: 10 * time.Second, next: ms(500), steps: []txStep{
			{ev: evReceive, at: ms(100), code: 183, want: phaseProceeding, next: none},
			{ev: evReceive, at: ms(200), code: 503, want: phaseCompleted, next: ms(200) + T4, final: true},
		}, code: 503},
		{name: "udp: a deadline shorter than T1", timeout: ms(300), next: ms(300), steps: []txStep{
			{ev: evFire, at: ms(300), want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "udp: a transport error", timeout: 3 * time.Second, next: ms(500), steps: []txStep{
			{ev: evFail, at: 0, want: phaseTerminated, next: none},
			{ev: evFire, at: ms(500), want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTransport},
		{name: "tcp silent: no retransmission", timeout: 3 * time.Second, reliable: true, next: 3 * time.Second, steps: []txStep{
			{ev: evReceive, at: ms(100), code: 100, want: phaseProceeding, next: none},
			{ev: evFire, at: 3 * time.Second, want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "tcp: Timer K is 0", timeout: 3 * time.Second, reliable: true, next: 3 * time.Second, steps: []txStep{
			{ev: evReceive, at: ms(40), code: 200, want: phaseTerminated, next: none, final: true},
			{ev: evReceive, at: ms(50), code: 200, want: phaseTerminated, next: none},
		}, code: 200},
		{name: "tcp reused, silent: one redial at the midpoint, then the deadline", timeout: 3 * time.Second, reliable: true, redial: true, next: ms(1500), steps: []txStep{
			{ev: evFire, at: ms(1500), want: phaseTrying, redial: true, next: 3 * time.Second},
			{ev: evFire, at: 3 * time.Second, want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "tcp reused: answered on the fresh connection", timeout: 3 * time.Second, reliable: true, redial: true, next: ms(1500), steps: []txStep{
			{ev: evFire, at: ms(1500), want: phaseTrying, redial: true, next: 3 * time.Second},
			{ev: evReceive, at: ms(1520), code: 200, want: phaseTerminated, next: none, final: true},
		}, code: 200},
		{name: "tcp reused: a provisional response, no redial", timeout: 3 * time.Second, reliable: true, redial: true, next: ms(1500), steps: []txStep{
			{ev: evReceive, at: ms(100), code: 100, want: phaseProceeding, next: none},
			{ev: evFire, at: ms(1500), want: phaseProceeding, next: 3 * time.Second},
			{ev: evFire, at: 3 * time.Second, want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "udp: redial is for streams only", timeout: ms(300), redial: true, next: ms(300), steps: []txStep{
			{ev: evFire, at: ms(300), want: phaseTerminated, next: none},
		}, reason: qualify.ReasonTimeout},
		{name: "started at its deadline: nothing sent", timeout: 0, next: none},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m machine
			start := instant(7 * time.Second) // any instant: the machine works on differences
			deadline := start.add(c.timeout)
			a := m.start(start, deadline, c.reliable, c.redial)
			if at := since(start, a.next); a.send != (c.next != none) || at != c.next {
				t.Fatalf("start: send %v, next %v; want send %v, next %v", a.send, at, c.next != none, c.next)
			}
			for _, s := range c.steps {
				now := start.add(s.at)
				var final bool
				switch s.ev {
				case evFire:
					a = m.fire(now)
				case evReceive:
					final, a = m.receive(s.code, now)
				case evFail:
					m.end(qualify.ReasonTransport, detailSendFailed)
					a = action{next: noTimer}
				}
				if at := since(start, a.next); m.phase != s.want || a.send != s.send || a.redial != s.redial || at != s.next || final != s.final {
					t.Fatalf("%v %d at %v: %v, send %v, redial %v, next %v, final %v; want %v, %v, %v, %v, %v",
						s.ev, s.code, s.at, m.phase, a.send, a.redial, at, final, s.want, s.send, s.redial, s.next, s.final)
				}
			}
			if c.timeout == 0 {
				c.reason = qualify.ReasonTimeout
			}
			if m.code != c.code || m.reason != c.reason {
				t.Errorf("outcome: code %d, reason %v; want %d, %v", m.code, m.reason, c.code, c.reason)
			}
		})
	}
}

// since is the instant i after start, or none.
func since(start, i instant) time.Duration {
	if i == noTimer {
		return none
	}
	return time.Duration(i - start)
}

// TestDeadlineAfter: the qualify deadline replaces Timer F, from the
// first send; qualify_timeout <= 0 means 64*T1
// (docs/qualify-semantics.md §3.2).
func TestDeadlineAfter(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{3 * time.Second, 3 * time.Second},
		{0, 64 * T1},
		{-time.Second, 64 * T1},
	} {
		if got := time.Duration(deadlineAfter(instant(time.Second), c.timeout) - instant(time.Second)); got != c.want {
			t.Errorf("deadlineAfter(1s, %v) = 1s + %v, want 1s + %v", c.timeout, got, c.want)
		}
	}
}

func TestPhaseString(t *testing.T) {
	got := fmt.Sprint(phaseTrying, phaseProceeding, phaseCompleted, phaseTerminated)
	if want := "Trying Proceeding Completed Terminated"; got != want {
		t.Errorf("phases %q, want %q", got, want)
	}
}
