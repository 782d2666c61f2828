package pjsip

import (
	"math"
	"strings"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// Endpoint is one endpoint (a type=endpoint section, or a wizard's) as far
// as qualifyd needs it: which AoRs it lists.
type Endpoint struct {
	// Name is the section's name.
	Name string
	// AoRs are the names in aors=, in order.
	AoRs []string
}

// endpointDef is an endpoint with the options that shape its AoRs'
// OPTIONS, each kept with its place for errors. An unset one is the zero
// variable.
type endpointDef struct {
	Endpoint
	outboundAuth, outboundProxy, transport, fromUser, fromDomain variable
	// resolved is set once the builder has looked up the transport's
	// protocol (proto) and TLS profile (tls) and the auth's credentials
	// (auth); unresolved notes those that do not exist (builder.resolve).
	resolved   bool
	proto      string
	tls        *probe.TLS
	auth       probe.Credentials
	unresolved string
}

// readEndpoint takes the options qualifyd needs (the last value of each
// wins) and ignores the many others. Like every string of a Config, its
// own are copies, not substrings of the configuration's text (AoR.own).
func readEndpoint(name string, vars []variable) *endpointDef {
	e := &endpointDef{Endpoint: Endpoint{Name: strings.Clone(name)}}
	fields := map[string]*variable{
		"outbound_auth":  &e.outboundAuth,
		"outbound_proxy": &e.outboundProxy,
		"transport":      &e.transport,
		"from_user":      &e.fromUser,
		"from_domain":    &e.fromDomain,
	}
	for _, v := range vars {
		if v.name == "aors" {
			e.AoRs = splitList(strings.Clone(v.value))
		} else if f, ok := fields[v.name]; ok {
			*f = v
			f.value = strings.Clone(v.value)
		}
	}
	return e
}

// readAuth takes an auth section's username, password and realm.
func readAuth(vars []variable) probe.Credentials {
	var c probe.Credentials
	for _, v := range vars {
		switch v.name {
		case "username":
			c.Username = strings.Clone(v.value)
		case "password":
			c.Password = strings.Clone(v.value)
		case "realm":
			c.Realm = strings.Clone(v.value)
		}
	}
	return c
}

// protocols are the values Asterisk accepts for a transport's protocol.
var protocols = []string{"udp", "tcp", "tls", "ws", "wss", "flow"}

// readTransport returns a transport section's protocol, lower case; udp
// when unset, as Asterisk.
func readTransport(name string, vars []variable) (string, error) {
	proto := "udp"
	for _, v := range vars {
		if v.name != "protocol" {
			continue
		}
		proto = strings.Clone(strings.ToLower(v.value))
		if !contains(protocols, proto) {
			return "", optErr(name, v, causef(ErrValue, "%q is not a transport protocol (udp, tcp, tls, ws, wss or flow)", v.value))
		}
	}
	return proto, nil
}

// global is what qualifyd reads of type=global sections: Asterisk's
// max_initial_qualify_time and qualifyd's panic options, each with
// whether it was set (the last value wins; each is checked).
type global struct {
	maxInitial, panicThreshold, panicMin, panicHold             int
	maxInitialSet, panicThresholdSet, panicMinSet, panicHoldSet bool
}

// globalOptions are the options of a type=global section qualifyd reads:
// each one's range, and where its value and whether it is set go.
var globalOptions = map[string]struct {
	lo, hi uint32
	field  func(g *global) (*int, *bool)
}{
	"max_initial_qualify_time": {0, 86400, func(g *global) (*int, *bool) { return &g.maxInitial, &g.maxInitialSet }},
	"panic_threshold":          {1, 100, func(g *global) (*int, *bool) { return &g.panicThreshold, &g.panicThresholdSet }},
	"panic_min_destinations":   {1, math.MaxInt32, func(g *global) (*int, *bool) { return &g.panicMin, &g.panicMinSet }},
	"panic_hold_threshold":     {1, 100, func(g *global) (*int, *bool) { return &g.panicHold, &g.panicHoldSet }},
}

// readGlobal reads a global section's options into g.
func readGlobal(g *global, name string, vars []variable) error {
	for _, v := range vars {
		o, ok := globalOptions[v.name]
		if !ok {
			continue
		}
		n, err := parseRange(v.value, o.lo, o.hi)
		if err != nil {
			return optErr(name, v, err)
		}
		val, set := o.field(g)
		*val, *set = n, true
	}
	return nil
}

// panic is the panic rule, defaults applied.
func (g *global) panic() Panic {
	p := Panic{Threshold: DefaultPanicThreshold, MinDestinations: DefaultPanicMinDestinations, HoldThreshold: DefaultPanicHoldThreshold}
	if g.panicHoldSet {
		p.HoldThreshold = g.panicHold
	}
	if g.panicThresholdSet {
		p.Threshold = g.panicThreshold
	}
	if g.panicMinSet {
		p.MinDestinations = g.panicMin
	}
	return p
}

// lastOf returns the last option called name.
func lastOf(vars []variable, name string) (variable, bool) {
	for i := len(vars) - 1; i >= 0; i-- {
		if vars[i].name == name {
			return vars[i], true
		}
	}
	return variable{}, false
}
