package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/source"
)

// newSources is the sources' keeper; with a state file, the last good
// lists are kept beside it in StateFile + ".sources".
func newSources(cfg Config) *source.Keeper {
	k := &source.Keeper{}
	if cfg.StateFile != "" {
		k.File = cfg.StateFile + ".sources"
	}
	return k
}

// restoreSources reads the last good lists; a file that cannot be used is
// logged and ignored, as the state file.
func (d *Daemon) restoreSources() {
	if err := d.sources.Restore(); err != nil {
		d.log.Notice(slog.LevelWarn, "sources file ignored: "+err.Error())
	}
}

// sourceNotices logs what the round's sources kept and why.
func (d *Daemon) sourceNotices(r *source.Round) {
	for _, n := range r.Notice {
		d.log.Notice(slog.LevelWarn, n)
	}
}

// commitSources records the applied round's lists as the last good ones,
// and wakes the refresh loop: the round may have added, removed or
// re-timed a source.
func (d *Daemon) commitSources(r *source.Round) {
	if err := r.Commit(); err != nil {
		d.log.Notice(slog.LevelWarn, "cannot write the sources file: "+err.Error())
	}
	select {
	case d.sourcesSet <- struct{}{}:
	default:
	}
}

// refreshSources re-reads each source every refresh_interval until ctx
// is done; a change is applied as a reload that reads nothing again.
// Without a source it sleeps until an applied configuration may have
// brought one (commitSources).
func (d *Daemon) refreshSources(ctx context.Context) {
	t := time.NewTimer(0)
	t.Stop()
	defer t.Stop()
	for {
		var due <-chan time.Time
		if next := d.sources.Next(); !next.IsZero() {
			t.Reset(max(time.Until(next), 0))
			due = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-d.sourcesSet:
			t.Stop()
			continue
		case <-due:
		}
		d.refreshDue(ctx)
	}
}

// refreshDue reads the sources that are due and reloads when one changed.
func (d *Daemon) refreshDue(ctx context.Context) {
	changed, notices := d.sources.Refresh(ctx)
	for _, n := range notices {
		d.log.Notice(slog.LevelWarn, n)
	}
	if changed {
		_ = d.reload(ctx, false, false) // logged by reload
	}
}

// watchSources registers the source series, read at scrape time from k.
func watchSources(m *metrics.Metrics, reg prometheus.Registerer, k *source.Keeper) error {
	return m.WatchSources(reg, func() []metrics.SourceStats {
		st := k.Status()
		out := make([]metrics.SourceStats, len(st))
		for i, s := range st {
			out[i] = metrics.SourceStats{Name: s.Name, Up: s.Up, AoRs: s.AoRs, LastSuccess: s.LastSuccess, Errors: s.Errors}
		}
		return out
	})
}

// sourceList is GET /api/v1/sources.
func (d *Daemon) sourceList() []api.Source {
	st := d.sources.Status()
	out := make([]api.Source, len(st))
	for i, s := range st {
		out[i] = api.Source{Name: s.Name, Driver: s.Driver, Up: s.Up, AoRs: s.AoRs,
			RefreshInterval: s.RefreshInterval.Seconds(), LastSuccess: api.At(s.LastSuccess),
			Errors: s.Errors, LastError: s.LastError}
	}
	return out
}
