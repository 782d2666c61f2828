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

// historyInterval is how often the history file is written while anything
// changed since its last write: a day of one-minute buckets is about 12 KB
// an AoR, 12 MB at the default 1000 AoRs, which every stateInterval would
// be 100 GB of synced writes a day. A crash loses at most this much of
// the histories, never a status.
const historyInterval = 5 * time.Minute

// historySuffix names the history file after the state file.
const historySuffix = ".history"

// stateKeeper keeps Config.StateFile and its history file (the same name
// with historySuffix): both read at start; the state file written every
// stateInterval when anything changed, the history file every
// historyInterval when anything changed (and at the first write), both
// once more at shutdown.
type stateKeeper struct {
	path  string
	saved *state.File // read at start; nil once restored
	mark  uint64      // the engine's changes at the last write
	err   string      // the last write's error, logged once

	histMark    uint64    // the engine's changes at the history file's last write
	histWritten time.Time // when it was last written; zero: not yet by this process
	histErr     string
}

// historyPath is the history file's name.
func (k *stateKeeper) historyPath() string { return k.path + historySuffix }

// historyDue reports whether the history file is to be written at now,
// with the engine at changes.
func (k *stateKeeper) historyDue(now time.Time, changes uint64) bool {
	return changes != k.histMark && (k.histWritten.IsZero() || now.Sub(k.histWritten) >= historyInterval)
}

// readState reads Config.StateFile and its history file, when there is
// one. A file that cannot be used is logged once and ignored.
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
	if f != nil {
		f.Histories = d.readHistories()
	}
	d.state.saved = f
}

// readHistories returns the histories of the history file: none when
// there is none, or when it cannot be used, which is logged.
func (d *Daemon) readHistories() []engine.History {
	f, err := state.Read(d.state.historyPath())
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

// keepState writes the state and history files when they are due, until
// ctx is done.
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
		case now := <-tick.C:
			changes := d.changes()
			if changes != d.state.mark {
				d.saveState(false)
			}
			if d.state.historyDue(now, changes) {
				d.saveHistories(now)
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

// saveState writes the state file; clean when the engine has stopped,
// and then the history file too. A failure is logged once until a write
// succeeds.
func (d *Daemon) saveState(clean bool) {
	if d.state.path == "" {
		return
	}
	mark := d.changes()
	h := state.Header{Written: time.Now(), Seq: d.eng.Seq(), Clean: clean}
	_, err := state.Write(d.state.path, h, state.Pages(d.eng), nil)
	d.state.err = d.logWrite(err, "state file", d.state.err)
	if err == nil {
		d.state.mark = mark
	}
	if clean {
		d.saveHistories(h.Written)
	}
}

// saveHistories writes the history file: a state file of no contacts and
// every history (package state).
func (d *Daemon) saveHistories(now time.Time) {
	mark := d.changes()
	h := state.Header{Written: now, Seq: d.eng.Seq()}
	_, err := state.Write(d.state.historyPath(), h, nil, state.Histories(d.eng))
	d.state.histErr = d.logWrite(err, "history file", d.state.histErr)
	if err == nil {
		d.state.histMark, d.state.histWritten = mark, now
	}
}

// logWrite logs a write's error unless it is last, the one logged
// before, and returns the error to remember: "" after a success.
func (d *Daemon) logWrite(err error, what, last string) string {
	switch {
	case err == nil:
		return ""
	case err.Error() != last:
		d.log.Notice(slog.LevelError, what+" not written: "+err.Error())
	}
	return err.Error()
}
