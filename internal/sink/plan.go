package sink

import (
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Source is what the sinks read levels from: *engine.Engine.
type Source interface {
	AoR(name string) (engine.AoRSnapshot, bool)
}

// plan is one sink's objects and the AoRs each depends on, built from
// the configuration; a level is computed from the engine's snapshots of
// those AoRs.
type plan struct {
	deps  map[Key][]string // object -> the AoRs it depends on, each once
	byAoR map[string][]Key // AoR -> the objects depending on it
}

// newPlan lays out the objects of sink s over conf:
//   - ami: one device per endpoint listing a followed AoR, over those
//     AoRs, and one per followed AoR that no endpoint lists (with
//     method=maintenance only endpoints, which Asterisk can put in
//     maintenance);
//   - kamailio: one object per host and port of a followed contact;
//   - webhook: every followed contact and AoR, and every endpoint listing
//     one.
func newPlan(s *pjsip.Sink, conf *pjsip.Config) *plan {
	p := &plan{deps: map[Key][]string{}, byAoR: map[string][]Key{}}
	followed := follows(s, conf)
	switch s.Driver {
	case "ami":
		listed := p.endpoints(conf, followed, KindDevice)
		if s.Method != "maintenance" {
			p.unlisted(conf, followed, listed)
		}
	case "kamailio":
		p.hosts(conf, followed)
	case "webhook":
		p.endpoints(conf, followed, KindEndpoint)
		p.contacts(conf, followed)
	}
	return p
}

// follows returns the AoRs s follows: its aors=, else every AoR whose
// qualify is on.
func follows(s *pjsip.Sink, conf *pjsip.Config) map[string]bool {
	out := map[string]bool{}
	if s.AoRs != nil {
		for _, a := range s.AoRs {
			out[a] = true
		}
		return out
	}
	for i := range conf.AoRs {
		if p := conf.AoRs[i].PolicyValue(); p.Enabled() {
			out[conf.AoRs[i].Name] = true
		}
	}
	return out
}

// add makes k depend on aor.
func (p *plan) add(k Key, aor string) {
	if slices.Contains(p.deps[k], aor) {
		return
	}
	p.deps[k] = append(p.deps[k], aor)
	p.byAoR[aor] = append(p.byAoR[aor], k)
}

// endpoints adds one object of kind per endpoint listing a followed AoR,
// and returns the followed AoRs some endpoint lists.
func (p *plan) endpoints(conf *pjsip.Config, followed map[string]bool, kind Kind) map[string]bool {
	listed := map[string]bool{}
	for _, e := range conf.Endpoints {
		for _, a := range e.AoRs {
			if followed[a] {
				p.add(Key{Kind: kind, Name: e.Name}, a)
				listed[a] = true
			}
		}
	}
	return listed
}

// unlisted adds one device per followed AoR that no endpoint lists; an
// AoR named as an endpoint shares its device.
func (p *plan) unlisted(conf *pjsip.Config, followed, listed map[string]bool) {
	for i := range conf.AoRs {
		if a := conf.AoRs[i].Name; followed[a] && !listed[a] {
			p.add(Key{Kind: KindDevice, Name: a}, a)
		}
	}
}

// hosts adds one object per host and port of a followed contact.
func (p *plan) hosts(conf *pjsip.Config, followed map[string]bool) {
	for i := range conf.AoRs {
		a := &conf.AoRs[i]
		if !followed[a.Name] {
			continue
		}
		for _, uri := range a.Contacts {
			if hp, ok := hostPort(uri); ok {
				p.add(Key{Kind: KindHost, Name: hp}, a.Name)
			}
		}
	}
}

// contacts adds every followed AoR and its contacts.
func (p *plan) contacts(conf *pjsip.Config, followed map[string]bool) {
	for i := range conf.AoRs {
		a := &conf.AoRs[i]
		if !followed[a.Name] {
			continue
		}
		p.add(Key{Kind: KindAoR, Name: a.Name}, a.Name)
		for _, uri := range a.Contacts {
			p.add(Key{Kind: KindContact, Name: a.Name, URI: uri}, a.Name)
		}
	}
}

// level computes k's level from src, for a contact the reason of its
// last failed probe, and for a Down the earliest time the last probes of
// its contacts may have been sent (each one's end less its effective
// timeout, 32 s when qualify_timeout <= 0, as the probe's deadline):
// the evidence the Down rests on is no older. A contact still down after
// a success (recovering towards qualify_successes) gives the zero time:
// its Down rests on no probe after a panic's end.
func (p *plan) level(k Key, src Source) (l Level, reason qualify.Reason, since time.Time) {
	var agg aggregate
	var found bool
	for _, name := range p.deps[k] {
		a, ok := src.AoR(name)
		if !ok {
			continue
		}
		for i := range a.Contacts {
			c := &a.Contacts[i]
			if k.Kind == KindContact && c.URI != k.URI || k.Kind == KindHost && !sameHost(c.URI, k.Name) {
				continue
			}
			agg.add(c)
			reason = c.Last.Reason
			if contactLevel(c) != Down {
				continue
			}
			sent := c.Last.At.Add(-a.Policy.ProbeTimeout())
			if c.Last.OK {
				sent = time.Time{} // recovering: a success is no evidence of a Down
			}
			if !found || sent.Before(since) {
				since, found = sent, true
			}
		}
	}
	if l = agg.level(); l != Down {
		return l, qualify.ReasonNone, time.Time{}
	}
	if k.Kind != KindContact {
		reason = qualify.ReasonNone
	}
	return l, reason, since
}

func sameHost(uri, hp string) bool {
	h, ok := hostPort(uri)
	return ok && h == hp
}
