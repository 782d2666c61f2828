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
	// one string so that a probe formats nothing (issue 7): see Addr.
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

// Credentials are an endpoint's outbound_auth, used to answer a 401/407
// challenge once. The zero value means none.
type Credentials struct {
	Username string
	Password string
	Realm    string
}

// ProbeOptions are the per-AoR settings that shape the OPTIONS request,
// taken from the AoR and its endpoint. The type is comparable: two AoRs
// probe the same way when their options are ==.
type ProbeOptions struct {
	// OutboundProxy is a SIP URI the request is sent through (Route), or "".
	OutboundProxy string
	// Transport is the endpoint's transport protocol ("udp", "tcp", "tls"),
	// used when the contact URI names none; "" means udp.
	Transport string
	// FromUser and FromDomain set the From header; empty means defaults.
	FromUser   string
	FromDomain string
	// Auth answers 401/407 challenges.
	Auth Credentials
}

// Target is one probe to send: the contact and how to reach it. It is
// passed by value; Options points at the AoR's shared settings.
type Target struct {
	// AoR is the name of the contact's AoR.
	AoR string
	// URI is the contact URI, as configured.
	URI string
	// Timeout is the probe's deadline from its first send.
	Timeout time.Duration
	// Options shapes the request; nil means defaults.
	Options *ProbeOptions
}
