package sink

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Released is one sink's result of Release.
type Released struct {
	Name, Driver string
	// Objects counts the sink's objects; Released those the router
	// confirmed up (a webhook: delivered as removed).
	Objects, Released int
	// Err is the router's last error when some were not confirmed.
	Err error
}

// Release pushes up every object of conf's sinks named in names (every
// sink when names is empty), whatever qualifyd last pushed: for taking
// qualifyd out of service (`qualifyd release`), so that no router keeps
// a Down that nothing will lift. The sinks run at once, each bounded by
// its timeout; cfg's Source is not used. A name that is no sink is an
// error before anything is sent.
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
	for k := range newPlan(def, conf).deps {
		rec.Set(k, Unknown, 0)
	}
	ctx, cancel := context.WithTimeout(ctx, def.Timeout)
	defer cancel()
	r := Released{Name: def.Name, Driver: def.Driver, Objects: rec.Stats().Objects}
	var failed int
	r.Released, failed = rec.Release(ctx, true)
	if failed > 0 {
		r.Err = fmt.Errorf("%d of %d objects not confirmed within %v: %s", failed, r.Objects, def.Timeout, rec.Stats().LastError)
	}
	return r
}
