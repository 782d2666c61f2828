// Package probe holds what a probe needs besides the qualify policy: the
// AoR as the configuration reader hands it to the engine, the options that
// shape its OPTIONS request, the digest credentials, and the Target the
// engine gives the prober for one probe. It is a leaf: it imports only
// internal/qualify (for the Policy an AoR carries), so that the reader
// (pjsip), the engine and the prober (sipprobe) share these types without
// importing each other, and the qualify package stays the contract's state
// machine alone.
package probe

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// AoR is one address of record to qualify: its static contacts, its
// policy and the options its probes are sent with. The configuration
// reader builds it in place and the engine applies it without a copy: at
// a million AoRs a copy was a fifth of a load's peak RSS.
type AoR struct {
	// Name is the AoR's name, unique among the AoRs applied together.
	Name string
	// Contacts are the static contact URIs, in order, unique within the
	// AoR.
	Contacts []string
	// Policy holds the AoR's qualify options; nil means the zero Policy
	// (qualify off). The configuration reader shares one Policy between
	// the AoRs that have the same: never modify it through an AoR.
	Policy *qualify.Policy
	// Probe shapes the OPTIONS request; nil means none of its options.
	// Shared like Policy (inline, it was half of a million-AoR
	// configuration's bytes per AoR): never modify it through an AoR.
	Probe *Options
}

// PolicyValue returns the policy a.Policy points to, or the zero Policy.
func (a *AoR) PolicyValue() qualify.Policy {
	if a.Policy == nil {
		return qualify.Policy{}
	}
	return *a.Policy
}

// OptionsValue returns the options a.Probe points to, or none.
func (a *AoR) OptionsValue() Options {
	if a.Probe == nil {
		return Options{}
	}
	return *a.Probe
}

// Credentials are an endpoint's outbound_auth, used to answer a 401/407
// challenge once. The zero value means none.
type Credentials struct {
	Username string
	Password string
	Realm    string
}

// Options are the per-AoR settings that shape the OPTIONS request, taken
// from the AoR and its endpoint. The type is comparable: two AoRs probe
// the same way when their options are ==.
type Options struct {
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
	// Unresolved notes the endpoint's transport or outbound_auth that the
	// configuration names but does not define, and how the probe goes
	// without it, as Asterisk's would ("transport "ipv4" is not defined:
	// sent by the contact URI alone, as Asterisk does"); "" when none.
	// The prober adds it to the detail of every failure.
	Unresolved string
	// TLS is what a probe over TLS trusts and presents: the pjsip TLS
	// transport it goes through (tls.go). Nil means the prober's own
	// client configuration (sipprobe.Config.TLS). Shared by the AoRs of
	// one transport: never modify it through an AoR.
	TLS *TLS
}

// Equal reports whether o and r shape a probe the same way: == but for
// TLS, which is compared by its settings (TLS.Settings), as a reload
// reads the transport into a new one. The reload rule (qualify-semantics
// §8) uses it.
func (o *Options) Equal(r *Options) bool {
	a, b := *o, *r
	a.TLS, b.TLS = nil, nil
	return a == b && o.TLS.Settings() == r.TLS.Settings()
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
	Options *Options
}
