package qualify

import (
	"net/netip"
	"time"
)

// Result is what one probe measured. A prober returns data, never a
// verdict: Policy.Judge decides whether it counts as a success.
type Result struct {
	// Sent is the first transmission of the request, where the deadline and
	// the RTT start. Zero when nothing was sent (DNS or transport failure
	// before the first write).
	Sent time.Time
	// RTT is the time from Sent to the final response; zero without one.
	RTT time.Duration
	// Code is the final response's status code, 0 without one.
	Code int
	// RetryAfter is the final response's Retry-After (RFC 3261 section
	// 20.33) in whole seconds when it is a 503 with one, else zero: a
	// peer asking for a pause (qualify-semantics §11.4).
	RetryAfter time.Duration
	// Reason is ReasonNone when a final response arrived, else why not.
	// Probers never return ReasonStatus; Judge derives it.
	Reason Reason
	// Detail is a short human explanation of a failure ("connection
	// refused", "x509: certificate is valid for a, not b"), or empty.
	Detail string
	// DNS is the time spent resolving the contact's host, not part of the
	// deadline.
	DNS time.Duration
	// Transport ("udp", "tcp" or "tls") and Dest are where the probe went
	// (or was going, when the transport failed); zero when no address was
	// found (DNS). When the contact resolved to several targets they are
	// those of the target whose result this is. Kept apart rather than as
	// one string so that a probe formats nothing: see Addr.
	Transport string
	Dest      netip.AddrPort
	// Targets holds one Result per target when the contact's host name
	// resolved to more than one (RFC 3263); nil otherwise. The Result that
	// holds them is the best of them: the first final response, preferring
	// a 2xx, else the first failure.
	Targets []Result
}

// Addr returns where the probe went, as "udp 192.0.2.7:5060", or "" when
// nothing was sent.
func (r Result) Addr() string {
	if !r.Dest.IsValid() {
		return ""
	}
	return r.Transport + " " + r.Dest.String()
}
