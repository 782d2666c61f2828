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

// stateKeeper keeps Config.StateFile, its mark file and its history file
// (package state's Keeper): the files read at start, written on the
// Keeper's cadence while running and once more at shutdown.
type stateKeeper struct {
	state.Keeper
	saved *state.File // read at start; nil once restored

	// the last write's error of each file, logged once
	err, markErr, histErr string
}

// readState reads Config.StateFile and its history file, when there is
// one. A file that cannot be used is logged once and ignored.
func (d *Daemon) readState() {
	d.state = stateKeeper{Keeper: state.Keeper{Path: d.cfg.StateFile}}
	if d.state.Path == "" {
		return
	}
	f, err := state.Take(d.state.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.log.Notice(slog.LevelInfo, "no state file yet", slog.String("state_file", d.state.Path))
	case err != nil && f == nil:
		d.log.Notice(slog.LevelWarn, "state file ignored: "+err.Error())
	case err != nil:
		d.log.Notice(slog.LevelWarn, "state file read, but not marked as taken: "+err.Error())
	}
	if f != nil {
		d.readMark(f)
		f.Histories = d.readHistories()
	}
	d.state.saved = f
}

// readMark applies the mark file to f, when there is one that vouches for
// it (state.File.Checked); one that cannot be used is logged and ignored,
// and f's states are as old as its last write.
func (d *Daemon) readMark(f *state.File) {
	m, err := state.ReadMark(d.state.Path + state.MarkSuffix)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		d.log.Notice(slog.LevelWarn, "mark file ignored: "+err.Error())
	default:
		f.Checked(m)
	}
}

// readHistories returns the histories of the history file: none when
// there is none, or when it cannot be used, which is logged.
func (d *Daemon) readHistories() []engine.History {
	f, err := state.Read(d.state.Path + state.HistorySuffix)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		d.log.Notice(slog.LevelWarn, "history file ignored: "+err.Error())
		return nil
	}
	return f.Histories
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
	d.log.Notice(slog.LevelInfo, "state restored", slog.String("state_file", d.state.Path), slog.Int("restored", n.Restored),
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

// keepState ticks the state keeper every state.Interval until ctx is
// done.
func (d *Daemon) keepState(ctx context.Context) {
	if d.state.Path == "" {
		return
	}
	tick := time.NewTicker(state.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			d.logWrites(d.state.Tick(now))
		}
	}
}

// saveState writes the state file, clean, and the history file, once the
// engine has stopped.
func (d *Daemon) saveState() {
	if d.state.Path != "" {
		d.logWrites(d.state.Stop(time.Now()))
	}
}

// logWrites logs the errors of r's writes, each once until a write of its
// file succeeds.
func (d *Daemon) logWrites(r state.Report) {
	d.state.err = d.logWrite(r.StateErr, "state file", d.state.err, r.State.Bytes > 0)
	d.state.markErr = d.logWrite(r.MarkErr, "mark file", d.state.markErr, r.Marked)
	d.state.histErr = d.logWrite(r.HistoryErr, "history file", d.state.histErr, r.History.Bytes > 0)
}

// logWrite logs a write's error unless it is last, the one logged
// before, and returns the error to remember: "" after a success (wrote),
// last when the file was not written at all.
func (d *Daemon) logWrite(err error, what, last string, wrote bool) string {
	switch {
	case err == nil && wrote:
		return ""
	case err == nil:
		return last
	case err.Error() != last:
		d.log.Notice(slog.LevelError, what+" not written: "+err.Error())
	}
	return err.Error()
}
