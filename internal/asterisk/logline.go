package asterisk

import (
	"fmt"
	"strconv"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Line returns the log line of one engine event, without a trailing
// newline; ok is false for events that print nothing.
//
//	Contact pbx07/sip:pbx07@192.0.2.7:5060 is now Unreachable.  RTT: 0.000 msec
//	Contact pbx07/sip:pbx07@192.0.2.7:5060 qualify failed (timeout): 1/3 failures, retrying in 2s
//	Contact pbx07/sip:pbx07@192.0.2.7:5060 is draining (503 with Retry-After): out of routing for 20s
func Line(ev engine.Event) (line string, ok bool) {
	switch ev.Kind {
	case engine.StatusChanged:
		return statusLine(ev), true
	case engine.ProbeFailed:
		return fmt.Sprintf("Contact %s/%s qualify failed (%s): %d/%d failures, retrying in %s",
			ev.AoR, ev.URI, ReasonText(ev.Reason, ev.Result.Code), ev.Failures, ev.FailureThreshold, Seconds(ev.Next.Sub(ev.Time))), true
	case engine.RecoveryProgress:
		return fmt.Sprintf("Contact %s/%s qualify succeeded: %d/%d successes, next in %s.  RTT: %s msec",
			ev.AoR, ev.URI, ev.Successes, ev.SuccessThreshold, Seconds(ev.Next.Sub(ev.Time)), Msec(ev.Result.RTT)), true
	case engine.DrainChanged:
		return drainLine(ev), true
	}
	return "", false
}

// drainLine says a contact began draining (qualify-semantics §11.4), for
// how long, or that its drain ended.
func drainLine(ev engine.Event) string {
	if !ev.Draining {
		return fmt.Sprintf("Contact %s/%s is no longer draining", ev.AoR, ev.URI)
	}
	out := "out of routing"
	if ev.LatencyOnly {
		out = "latency only, still routable"
	}
	if !ev.Next.IsZero() {
		out += " for " + Seconds(ev.Next.Sub(ev.Time))
	}
	return fmt.Sprintf("Contact %s/%s is draining (503 with Retry-After): %s", ev.AoR, ev.URI, out)
}

// statusLine is Asterisk's "Contact AOR/URI is now LABEL.  RTT: N.NNN msec"
// (two spaces after the period; RTT 0.000 unless the probe answered).
func statusLine(ev engine.Event) string {
	label := ev.To.String()
	if ev.To == qualify.Unreachable && ev.LatencyOnly {
		label += " (latency only, still routable)"
	}
	rtt := time.Duration(0)
	if ev.To == qualify.Reachable {
		rtt = ev.Result.RTT
	}
	return fmt.Sprintf("Contact %s/%s is now %s.  RTT: %s msec", ev.AoR, ev.URI, label, Msec(rtt))
}

// EndpointLine is Asterisk's endpoint line, "Endpoint pbx07 is now
// Reachable" or "... Unreachable" (no period, unlike the contact lines).
func EndpointLine(endpoint string, available bool) string {
	state := "Unreachable"
	if available {
		state = "Reachable"
	}
	return "Endpoint " + endpoint + " is now " + state
}

// ReasonText names a failure as the logs and the API do: "timeout",
// "transport", "dns", or "status 503".
func ReasonText(r qualify.Reason, code int) string {
	if r == qualify.ReasonStatus {
		return "status " + strconv.Itoa(code)
	}
	return r.String()
}

// Msec formats d in milliseconds with three decimals, as Asterisk's RTT.
func Msec(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64)
}

// Seconds formats d in seconds with at most three decimals: "2s", "2.5s".
func Seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64) + "s"
}
