package pjsip

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// finish reports the sections' errors errs, after a second AoR of one
// name if one came before the first of them, then gives each AoR, in file
// order, its probe options, and sorts the endpoints by name.
func (b *builder) finish(errs []error) (*Config, error) {
	if dup := b.duplicate(); dup != nil {
		errs = append([]error{dup}, errs...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	b.drop()
	if err := b.buildTLS(); err != nil {
		return nil, err
	}
	var owners map[string]*endpointDef
	if len(b.endpoints) > 0 {
		owners = b.endpointsByAoR()
	}
	probes := probeSet{}
	for _, i := range b.slot {
		if err := b.probe(&b.aors[i], owners[b.aors[i].Name], probes); err != nil {
			return nil, err
		}
	}
	cfg := &Config{AoRs: b.aors, MaxInitialQualifyTime: time.Duration(b.global.maxInitial) * time.Second,
		Panic: b.global.panic(), Sinks: b.sinks, Sources: b.sources, Cluster: b.cluster, Warnings: b.warnings,
		NotAsterisk: b.notAsterisk, TLS: b.tlsOrder}
	for _, k := range b.sinks {
		if err := checkSinkAoRs(k, b.aors); err != nil {
			return nil, err
		}
	}
	for _, e := range b.endpoints {
		cfg.Endpoints = append(cfg.Endpoints, e.Endpoint)
	}
	slices.SortFunc(cfg.Endpoints, func(x, y Endpoint) int { return cmp.Compare(x.Name, y.Name) })
	return cfg, nil
}

// nameAt is an AoR's name and its place in file order.
type nameAt struct {
	name string
	at   int
}

// byName returns the names and file-order places of the sections that
// make an AoR (type=aor and type=wizard; an AoR is named after its
// section), sorted by name, then place. Sorting these 24-byte keys before
// the AoRs are built lets each be built where it belongs, so no AoR is
// moved afterwards.
func byName(t *texts, sections *sectionBlocks) []nameAt {
	n := 0
	for s := range sections.all {
		if makesAoR(t, s) {
			n++
		}
	}
	order := make([]nameAt, 0, n)
	for s := range sections.all {
		if makesAoR(t, s) {
			order = append(order, nameAt{s.name, len(order)})
		}
	}
	slices.SortFunc(order, func(x, y nameAt) int {
		return cmp.Or(strings.Compare(x.name, y.name), cmp.Compare(x.at, y.at))
	})
	return order
}

func makesAoR(t *texts, s *section) bool {
	typ, ok := t.first(s, "type")
	return ok && !s.template && (typ == "aor" || typ == "wizard")
}

// slots inverts order: for each place in file order, the index in name
// order.
func slots(order []nameAt) []int32 {
	slot := make([]int32, len(order))
	for i, k := range order {
		slot[k.at] = int32(i)
	}
	return slot
}

// duplicate returns the error of the first AoR, in file order, whose name
// an earlier one has, among the AoRs whose names were read (an AoR
// section's even when its options fail; not those after the reading
// stopped at MaxErrors); or nil. The AoRs of sections and wizards share
// one namespace, as Asterisk's sorcery objects of a type.
func (b *builder) duplicate() error {
	second, first := -1, -1
	for i := 1; i < len(b.order); i++ {
		x, y := b.order[i-1], b.order[i]
		if x.name == y.name && b.named(x) && b.named(y) && (second < 0 || y.at < second) {
			second, first = y.at, x.at
		}
	}
	if second < 0 {
		return nil
	}
	a, f := &b.aors[b.slot[second]], &b.aors[b.slot[first]]
	return &Error{File: a.File, Line: a.Line, Section: a.Name,
		Err: causef(ErrDuplicate, "a second aor named %q (the first is at %s:%d)", a.Name, f.File, f.Line)}
}

// endpointsByAoR returns, for each AoR name an endpoint lists in aors=, the
// first such endpoint in file order, so that finding an AoR's endpoint
// is one lookup, not a scan of every endpoint (N squared steps for N
// endpoints and N AoRs).
func (b *builder) endpointsByAoR() map[string]*endpointDef {
	owners := make(map[string]*endpointDef, len(b.endpoints))
	for _, e := range b.endpoints {
		for _, name := range e.AoRs {
			if _, ok := owners[name]; !ok {
				owners[name] = e
			}
		}
	}
	return owners
}

// drop forgets the objects of the types unique dropped that qualifyd
// reads, as Asterisk never loads them: an endpoint's transport or
// outbound_auth then resolves late (see resolve).
func (b *builder) drop() {
	if b.dropped["transport"] {
		clear(b.transports)
		b.tlsDefs = nil
	}
	if b.dropped["auth"] {
		clear(b.auths)
	}
	if b.dropped["global"] {
		b.global = global{}
	}
}

// probe sets a.Probe from the AoR's own outbound_proxy and e, the first
// endpoint, in file order, whose aors lists a (nil: none), to options
// shared through probes. The AoR's own outbound_proxy wins over the
// endpoint's, as Asterisk sets the contact's proxy after the endpoint's;
// an endpoint's proxy that no probe could go through is an error.
func (b *builder) probe(a *AoR, e *endpointDef, probes probeSet) error {
	o := a.OptionsValue()
	o.TLS = b.firstTLS()
	if e != nil {
		if o.OutboundProxy == "" && e.outboundProxy.value != "" {
			if err := checkProxy(e.outboundProxy.value); err != nil {
				return optErr(e.Name, e.outboundProxy, err)
			}
			o.OutboundProxy = e.outboundProxy.value
		}
		o.FromUser, o.FromDomain = e.fromUser.value, e.fromDomain.value
		b.resolve(e)
		o.Transport, o.Auth, o.Unresolved, o.TLS = e.proto, e.auth, e.unresolved, e.tls
	}
	a.Probe = probes.get(o)
	return nil
}

// probeSet shares probe options between the AoRs of a configuration:
// nearly all AoRs have the same few, so each distinct value is held once,
// not once per AoR.
type probeSet map[probe.Options]*probe.Options

// get returns the shared copy of o, or nil for no options. A new copy's
// strings are cloned: they may be parts of a configuration file.
func (s probeSet) get(o probe.Options) *probe.Options {
	if o == (probe.Options{}) {
		return nil
	}
	return share(s, o, func(o probe.Options) probe.Options {
		return probe.Options{OutboundProxy: strings.Clone(o.OutboundProxy), Transport: strings.Clone(o.Transport),
			FromUser: strings.Clone(o.FromUser), FromDomain: strings.Clone(o.FromDomain), Unresolved: strings.Clone(o.Unresolved),
			Auth: probe.Credentials{Username: strings.Clone(o.Auth.Username), Password: strings.Clone(o.Auth.Password),
				Realm: strings.Clone(o.Auth.Realm)}, TLS: o.TLS}
	})
}

// share returns m's copy of v, adding own(v) (v itself when own is nil)
// when m has none. The new copy is also the key, so that the map keeps
// nothing of v's that own replaced.
func share[T comparable](m map[T]*T, v T, own func(T) T) *T {
	if p, ok := m[v]; ok {
		return p
	}
	if own != nil {
		v = own(v)
	}
	p := new(T)
	*p = v
	m[v] = p
	return p
}

// resolve looks up e's transport and first outbound_auth, once, and
// warns of each that does not exist. Asterisk resolves both only when it
// sends (qualify-semantics §3.1), and qualifyd probes as it then does:
//   - a transport it cannot find is logged ("Unable to retrieve PJSIP
//     transport") and the request goes without a transport selector, by
//     the contact URI alone: create_out_of_dialog_request (res_pjsip.c)
//     ignores ast_sip_set_tpselector_from_ep_or_uri's failure;
//   - an auth it cannot find is logged ("Couldn't find auth") by
//     ast_sip_retrieve_auths, the challenge is not answered, and the 401
//     or 407 is the final response.
//
// Each goes into the probes' Unresolved note, which the prober adds to
// a failure's detail.
func (b *builder) resolve(e *endpointDef) {
	if e.resolved {
		return
	}
	e.resolved = true
	notes := []string{b.resolveTransport(e), b.resolveAuth(e)}
	e.unresolved = strings.Join(slices.DeleteFunc(notes, func(n string) bool { return n == "" }), "; ")
}

// resolveTransport sets e.proto and e.tls, and returns the note of a
// transport that is not defined, or "".
func (b *builder) resolveTransport(e *endpointDef) string {
	name := e.transport.value
	proto, ok := b.transports[name]
	e.tls = b.tlsOf(name, proto, ok)
	if name == "" {
		return ""
	}
	e.proto = proto
	if ok {
		return ""
	}
	b.lateReference(e, e.transport, "transport", name,
		"probes go by the contact URI alone, as Asterisk sends them (it logs \"Unable to retrieve PJSIP transport '%s'\")")
	return fmt.Sprintf("transport %q is not defined: sent by the contact URI alone, as Asterisk does", name)
}

// resolveAuth sets e.auth from the first outbound_auth (a wizard's own
// first), and returns the note of one that is not defined, or "".
func (b *builder) resolveAuth(e *endpointDef) string {
	names := splitList(e.outboundAuth.value)
	if len(names) == 0 {
		return ""
	}
	c, ok := b.wizardAuths[names[0]]
	if !ok {
		c, ok = b.auths[names[0]]
	}
	e.auth = c
	if ok {
		return ""
	}
	b.lateReference(e, e.outboundAuth, "auth", names[0],
		"a challenge is not answered, as Asterisk does (it logs \"Couldn't find auth '%s'. Cannot authenticate\")")
	return fmt.Sprintf("auth %q is not defined: a challenge is not answered, as Asterisk does", names[0])
}

// lateReference warns that e's option v names a typ section that does
// not exist; then says what happens, with the name in its %s.
func (b *builder) lateReference(e *endpointDef, v variable, typ, name, then string) {
	b.warnings = append(b.warnings, &Error{File: v.file, Line: v.line, Section: e.Name, Option: v.key,
		Err: causef(ErrReference, "no %s section %q: %s", typ, name, fmt.Sprintf(then, name))})
}

// named reports whether the AoR at k's place was read far enough to have
// its name and place.
func (b *builder) named(k nameAt) bool { return b.aors[b.slot[k.at]].File != "" }
