package sink

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Released is one sink's result of Release.
type Released struct {
	Name, Driver string
	// Objects counts the sink's objects; Released those the router
	// confirmed up (a webhook: delivered as removed); Downs those sent
	// first, as Down in the saved levels or in the router's read-back.
	Objects, Released, Downs int
	// Err is the router's last error when some were not confirmed.
	Err error
}

// Release pushes up every object of conf's sinks named in names (every
// sink when names is empty), whatever qualifyd last pushed: for taking
// qualifyd out of service (`qualifyd release`), so that no router keeps
// a Down that nothing will lift. The sinks run at once, each bounded by
// its timeout. cfg's Source, if set, holds the levels qualifyd last had
// (Saved, from the state file): the objects Down in it are sent first,
// with those the router reads back Down (a Kamailio's inactive
// destinations). A name that is no sink is an error before anything is
// sent.
func Release(ctx context.Context, conf *pjsip.Config, names []string, cfg Config) ([]Released, error) {
	var defs []*pjsip.Sink
	for _, s := range conf.Sinks {
		if len(names) == 0 || slices.Contains(names, s.Name) {
			defs = append(defs, s)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(defs, func(s *pjsip.Sink) bool { return s.Name == n }) {
			return nil, fmt.Errorf("no sink named %q", n)
		}
	}
	g := NewGroup(cfg)
	out := make([]Released, len(defs))
	var wg sync.WaitGroup
	for i, def := range defs {
		wg.Go(func() { out[i] = g.releaseOne(ctx, def, conf) })
	}
	wg.Wait()
	return out, nil
}

// releaseOne pushes up every object of def's plan over conf.
func (g *Group) releaseOne(ctx context.Context, def *pjsip.Sink, conf *pjsip.Config) Released {
	rec := g.reconciler(def)
	p := newPlan(def, conf)
	for k := range p.deps {
		l := Unknown
		if g.cfg.Source != nil {
			l, _, _ = p.level(k, g.cfg.Source)
		}
		rec.Set(k, l, 0)
	}
	ctx, cancel := context.WithTimeout(ctx, def.Timeout)
	defer cancel()
	r := Released{Name: def.Name, Driver: def.Driver, Objects: rec.Stats().Objects}
	var failed int
	r.Released, failed, r.Downs = rec.release(ctx, true)
	if failed > 0 {
		r.Err = fmt.Errorf("%d of %d objects not confirmed within %v: %s", failed, r.Objects, def.Timeout, rec.Stats().LastError)
	}
	return r
}

// Saved is a Source over the contacts of a state file (state.File's
// Contacts): the statuses qualifyd had when it last wrote the file.
type Saved map[string]engine.AoRSnapshot

// NewSaved indexes saved by AoR.
func NewSaved(saved []engine.Saved) Saved {
	out := Saved{}
	for i := range saved {
		c := &saved[i]
		a := out[c.AoR]
		a.Name = c.AoR
		a.Contacts = append(a.Contacts, engine.ContactSnapshot{AoR: c.AoR, URI: c.URI, Status: c.State.Status,
			LatencyOnly: c.Policy != nil && c.Policy.LatencyOnly})
		out[c.AoR] = a
	}
	return out
}

// AoR returns the saved contacts of the AoR name.
func (s Saved) AoR(name string) (engine.AoRSnapshot, bool) {
	a, ok := s[name]
	return a, ok
}
