package state

import (
	"iter"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
)

// Interval is how often a Keeper is to be ticked: the least time between
// two writes of the state file, and the most a crash loses of a status
// or a counter while the file is small enough for its StatusBudget.
const Interval = 10 * time.Second

// HistoryInterval is the least time between two writes of the history
// file, and between two writes of the state file for the last results
// and statistics alone: a crash loses at most this much of them while
// the file is small enough for ResultBudget.
const HistoryInterval = 5 * time.Minute

// StatusBudget bounds the bytes a day the state file takes when statuses
// or counters change all the time: it is rewritten at most every
// Interval, and no sooner after its last write than that write's size
// at this rate allows (about 400 s for the 37 MB of a million contacts).
const StatusBudget = 8e9

// ResultBudget bounds the bytes a day the state file takes when only the
// last results, RTTs, statistics and learned loss counts change (every
// probe): it is then rewritten at most every HistoryInterval, and no
// sooner than its last write's size at this rate allows (about 104
// minutes for the 37 MB of a million contacts).
const ResultBudget = 512e6

// Suffixes name the history and mark files after the state file.
const (
	HistorySuffix = ".history"
	MarkSuffix    = ".mark"
)

// WriteFunc writes a state file as Write does.
type WriteFunc func(path string, h Header, pages iter.Seq[[]engine.Saved], hists iter.Seq[*engine.History]) (Stats, error)

// Keeper writes an engine's state file, mark file and history file when
// each is due (see the package doc, "Cadence"). Tick it every Interval;
// not safe for concurrent use.
type Keeper struct {
	// Path is the state file; the mark and history files are Path with
	// MarkSuffix and HistorySuffix.
	Path   string
	Engine *engine.Engine
	// Write writes the state and history files; nil: Write.
	Write WriteFunc
	// WriteMark writes the mark file; nil: WriteMark.
	WriteMark func(path string, m Mark) error

	durable, changes uint64    // the engine's at the state file's last write
	written          time.Time // that write's Header.Written; zero: none yet
	size             int64     // its size

	histChanges uint64    // Changes at the history file's last write
	histWritten time.Time // its Header.Written; zero: none yet
}

// Report says what a Tick or a Stop wrote: zero Stats for a file not
// written, and each write's error.
type Report struct {
	State, History    Stats
	Marked            bool
	StateErr, MarkErr error
	HistoryErr        error
}

// Changes counts what changed e's state since it started: its events
// and its applied probes (each a new last result).
func Changes(e *engine.Engine) uint64 {
	n := e.Seq()
	for _, k := range e.Counters().Probes {
		n += k
	}
	return n
}

// Tick writes what is due at now: the state file when a status or a
// counter changed (engine.Durable) and its budget allows, or when only
// results changed and theirs does; else the mark, once this Keeper has
// written a state file and while every status and counter is as written
// (a change the budget defers is not vouched for); and the history file
// every HistoryInterval while anything changed (at once the first time).
func (k *Keeper) Tick(now time.Time) Report {
	var r Report
	durable, changes := k.Engine.Durable(), Changes(k.Engine)
	switch {
	case k.stateDue(now, durable, changes):
		r.State, r.StateErr = k.writeState(now, false, durable, changes)
	case !k.written.IsZero() && durable == k.durable:
		r.MarkErr = k.mark(now)
		r.Marked = r.MarkErr == nil
	}
	if changes != k.histChanges && (k.histWritten.IsZero() || now.Sub(k.histWritten) >= HistoryInterval) {
		r.History, r.HistoryErr = k.writeHistory(now, changes)
	}
	return r
}

// Stop writes both files at now, the state file marked clean: call it
// once the engine has stopped.
func (k *Keeper) Stop(now time.Time) Report {
	var r Report
	durable, changes := k.Engine.Durable(), Changes(k.Engine)
	r.State, r.StateErr = k.writeState(now, true, durable, changes)
	r.History, r.HistoryErr = k.writeHistory(now, changes)
	return r
}

// stateDue reports whether the state file is to be written at now, with
// the engine at durable and changes.
func (k *Keeper) stateDue(now time.Time, durable, changes uint64) bool {
	since := now.Sub(k.written)
	if k.written.IsZero() {
		since = 1<<63 - 1
	}
	switch {
	case durable != k.durable:
		return since >= spacing(k.size, StatusBudget, Interval)
	case changes != k.changes:
		return since >= spacing(k.size, ResultBudget, HistoryInterval)
	}
	return false
}

// spacing is the least time between two writes of size bytes that keeps
// to budget bytes a day, and at least floor.
func spacing(size int64, budget float64, floor time.Duration) time.Duration {
	return max(floor, time.Duration(float64(size)/budget*float64(24*time.Hour)))
}

// writeState writes the state file, with the engine at durable and
// changes before it.
func (k *Keeper) writeState(now time.Time, clean bool, durable, changes uint64) (Stats, error) {
	h := Header{Written: now, Seq: k.Engine.Seq(), Clean: clean}
	st, err := k.write()(k.Path, h, Pages(k.Engine), nil)
	if err != nil {
		return Stats{}, err
	}
	k.durable, k.changes, k.written, k.size = durable, changes, now, st.Bytes
	return st, nil
}

// mark writes the mark file of the last state file written.
func (k *Keeper) mark(now time.Time) error {
	write := k.WriteMark
	if write == nil {
		write = WriteMark
	}
	return write(k.Path+MarkSuffix, Mark{Of: k.written, At: now})
}

// writeHistory writes the history file: a state file of no contacts and
// every history, with the engine at changes before it.
func (k *Keeper) writeHistory(now time.Time, changes uint64) (Stats, error) {
	h := Header{Written: now, Seq: k.Engine.Seq()}
	st, err := k.write()(k.Path+HistorySuffix, h, nil, Histories(k.Engine))
	if err != nil {
		return Stats{}, err
	}
	k.histChanges, k.histWritten = changes, now
	return st, nil
}

func (k *Keeper) write() WriteFunc {
	if k.Write == nil {
		return Write
	}
	return k.Write
}
