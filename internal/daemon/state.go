package daemon

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/state"
)

// stateInterval is how often the state file is written while anything
// changed since the last write.
const stateInterval = 10 * time.Second

// stateKeeper keeps Config.StateFile: read at start, written every
// stateInterval when anything changed and once more at shutdown.
type stateKeeper struct {
	path  string
	saved *state.File // read at start; nil once restored
	mark  uint64      // the engine's changes at the last write
	err   string      // the last write's error, logged once
}

// readState reads Config.StateFile, when there is one. A file that
// cannot be used is logged once and ignored.
func (d *Daemon) readState() {
	d.state = stateKeeper{path: d.cfg.StateFile}
	if d.state.path == "" {
		return
	}
	f, err := state.Take(d.state.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.log.Notice(slog.LevelInfo, "no state file yet", slog.String("state_file", d.state.path))
	case err != nil && f == nil:
		d.log.Notice(slog.LevelWarn, "state file ignored: "+err.Error())
	case err != nil:
		d.log.Notice(slog.LevelWarn, "state file read, but not marked as taken: "+err.Error())
	}
	d.state.saved = f
}

// startSeq is the number of the event before the engine's first: the
// saved one when the file was written at a clean stop, else past any
// number a previous process can have reached (engine.StartSeq).
func (d *Daemon) startSeq() uint64 {
	f := d.state.saved
	if f != nil && f.Clean {
		return f.Seq
	}
	seq := engine.StartSeq(time.Now())
	if f != nil {
		seq = max(seq, f.Seq)
	}
	return seq
}

// restoreState restores the saved states into the engine, before its
// first probe, a chunk at a time, letting the log's follower catch up
// between chunks so that it loses none of their events.
func (d *Daemon) restoreState() {
	f := d.state.saved
	if f == nil {
		return
	}
	d.state.saved = nil
	var n engine.Restored
	// Each state publishes at most a status and an availability change,
	// which the log's subscription must hold until the follower takes
	// them.
	chunk := max(cap(d.events.C)/4, 1)
	for chunk := range slices.Chunk(f.Contacts, chunk) {
		n.Add(d.eng.Restore(chunk, f.Seal))
		d.caughtUp()
	}
	hists := d.eng.RestoreHistory(f.Histories)
	d.log.Notice(slog.LevelInfo, "state restored", slog.String("state_file", d.state.path), slog.Int("restored", n.Restored),
		slog.Int("changed", n.Changed), slog.Int("stale", n.Stale), slog.Int("histories", hists), slog.Time("written", f.Written))
}

// caughtUp waits until the log's subscription holds at most half its
// buffer. The follower signals idle each time it has taken every event,
// so a signal older than the wait only makes it look again.
func (d *Daemon) caughtUp() {
	for len(d.events.C) > cap(d.events.C)/2 {
		<-d.idle
	}
}

// keepState writes the state file every stateInterval when anything
// changed, until ctx is done.
func (d *Daemon) keepState(ctx context.Context) {
	if d.state.path == "" {
		return
	}
	tick := time.NewTicker(stateInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if d.changes() != d.state.mark {
				d.saveState(false)
			}
		}
	}
}

// changes counts what changed the engine's state: its events and its
// applied probes (each a new last result).
func (d *Daemon) changes() uint64 {
	n := d.eng.Seq()
	for _, k := range d.eng.Counters().Probes {
		n += k
	}
	return n
}

// saveState writes the state file; clean when the engine has stopped. A
// failure is logged once until a write succeeds.
func (d *Daemon) saveState(clean bool) {
	if d.state.path == "" {
		return
	}
	mark := d.changes()
	h := state.Header{Written: time.Now(), Seq: d.eng.Seq(), Clean: clean}
	_, err := state.Write(d.state.path, h, state.Pages(d.eng), state.Histories(d.eng))
	switch {
	case err == nil:
		d.state.mark, d.state.err = mark, ""
	case err.Error() != d.state.err:
		d.state.err = err.Error()
		d.log.Notice(slog.LevelError, "state file not written: "+err.Error())
	}
}
