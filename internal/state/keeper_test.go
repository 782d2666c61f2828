package state

import (
	"context"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// scripted answers a probe at once: a timeout for the AoRs in down, 200
// OK for the others.
type scripted struct{ down map[string]bool }

func (s *scripted) Start(_ context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	if s.down[t.AoR] {
		done(tag, qualify.Result{Reason: qualify.ReasonTimeout, Detail: "no response"})
		return
	}
	done(tag, qualify.Result{Code: 200, RTT: 5 * time.Millisecond})
}

// keeperRig is an engine of three one-contact AoRs (a, b, c) in simulated
// time, and a Keeper of files in a temporary directory, ticked every
// Interval, recording what it writes.
type keeperRig struct {
	t      *testing.T
	now    time.Time
	tick   time.Time
	prober *scripted
	e      *engine.Engine
	d      *engine.Driver
	k      Keeper
	aors   []probe.AoR
	// writes of the state file, at their Header.Written
	states []time.Time
	marks  int
	// bytes, when not 0, is the size reported for each write of the
	// state file, as if it held that many bytes of contacts.
	bytes int64
}

var rigStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// rigPolicy: F = 20 s, so that 10 F (the restore's bound) is shorter
// than HistoryInterval; N = 2, so that a failure counts towards it.
var rigPolicy = qualify.Policy{Frequency: 20 * time.Second, Timeout: 3 * time.Second, Failures: 2, Successes: 1}

func newKeeperRig(t *testing.T) *keeperRig {
	t.Helper()
	r := &keeperRig{t: t, now: rigStart, tick: rigStart.Add(Interval), prober: &scripted{down: map[string]bool{}}}
	var err error
	r.e, err = engine.New(engine.Config{Prober: r.prober, Now: func() time.Time { return r.now }, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		r.aors = append(r.aors, probe.AoR{Name: name, Contacts: []string{"sip:" + name + "@192.0.2.1"}, Policy: &rigPolicy})
	}
	if err := r.e.Apply(r.aors); err != nil {
		t.Fatal(err)
	}
	r.d = r.e.Drive(t.Context())
	r.k = Keeper{Path: filepath.Join(t.TempDir(), "state"), Engine: r.e, Write: r.write,
		WriteMark: func(path string, m Mark) error { r.marks++; return WriteMark(path, m) }}
	return r
}

func (r *keeperRig) write(path string, h Header, pages iter.Seq[[]engine.Saved], hists iter.Seq[*engine.History]) (Stats, error) {
	if path != r.k.Path {
		return Write(path, h, pages, hists)
	}
	r.states = append(r.states, h.Written)
	st, err := Write(path, h, pages, hists)
	if r.bytes != 0 {
		st.Bytes = r.bytes
	}
	return st, err
}

// run advances the simulation by d, probing and ticking the keeper.
func (r *keeperRig) run(d time.Duration) {
	for end := r.now.Add(d); r.now.Before(end); {
		if due, ok := r.d.Next(); ok && due.Before(r.tick) && due.Before(end) {
			r.now = due
			r.d.StartDue()
			continue
		}
		if r.tick.After(end) {
			r.now = end
			return
		}
		r.now = r.tick
		rep := r.k.Tick(r.now)
		if rep.StateErr != nil || rep.MarkErr != nil || rep.HistoryErr != nil {
			r.t.Fatalf("tick at %v: %+v", r.now, rep)
		}
		r.tick = r.tick.Add(Interval)
	}
}

// writesSince returns the state file's writes at or after at.
func (r *keeperRig) writesSince(at time.Time) int {
	n := 0
	for _, w := range r.states {
		if !w.Before(at) {
			n++
		}
	}
	return n
}

// saved reads the state file back, its mark applied, and returns the
// saved state of AoR name.
func (r *keeperRig) saved(name string) (*File, engine.Saved) {
	r.t.Helper()
	f, err := Read(r.k.Path)
	if err != nil {
		r.t.Fatal(err)
	}
	if m, err := ReadMark(r.k.Path + MarkSuffix); err == nil {
		f.Checked(m)
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.t.Fatal(err)
	}
	for _, s := range f.Contacts {
		if s.AoR == name {
			return f, s
		}
	}
	r.t.Fatalf("no saved state of %s in %+v", name, f.Contacts)
	return nil, engine.Saved{}
}

// steady runs the rig until every contact is Reachable and the results
// written for it, and returns the time of its last state file write.
func (r *keeperRig) steady() time.Time {
	r.run(2 * time.Minute)
	if len(r.states) == 0 {
		r.t.Fatal("no state file written for the first verdicts")
	}
	return r.states[len(r.states)-1]
}

// TestKeeperHealthyWritesMarks: in a healthy steady state the state file
// is not rewritten at every tick although every probe brings a new last
// result: the keeper writes the mark instead, and the results on their
// own cadence (HistoryInterval for a small file).
func TestKeeperHealthyWritesMarks(t *testing.T) {
	r := newKeeperRig(t)
	last := r.steady()
	marks, from := r.marks, r.now
	quiet := last.Add(HistoryInterval - Interval).Sub(r.now) // every tick before the results are due
	r.run(quiet)
	if n := r.writesSince(last.Add(time.Nanosecond)); n != 0 {
		t.Fatalf("healthy contacts rewrote the state file %d times in the %v after %v (writes %v)", n, quiet, from, r.states)
	}
	if got, want := r.marks-marks, int(quiet/Interval); got != want || want < 15 {
		t.Fatalf("%d marks in %v, want one a tick: %d", got, quiet, want)
	}
	if _, s := r.saved("a"); !s.Held.After(s.Last.At.Add(3*time.Minute)) || s.State.Status != qualify.Reachable {
		t.Fatalf("the mark does not vouch for the file: %+v", s)
	}
	r.run(2 * Interval)
	if n := r.writesSince(last.Add(time.Nanosecond)); n != 1 {
		t.Fatalf("%d writes of the results in the %v after the last (%v), want 1", n, HistoryInterval, r.states)
	}
	if w := r.states[len(r.states)-1]; w.Sub(last) != HistoryInterval {
		t.Fatalf("the results written %v after the last write, want %v", w.Sub(last), HistoryInterval)
	}
}

// TestKeeperWritesVerdictChanges: a failure counted towards N, a status
// change, a success counted towards M and a suspect's failures reset by a
// success are each in the state file at the next tick.
func TestKeeperWritesVerdictChanges(t *testing.T) {
	r := newKeeperRig(t)
	r.steady()
	step := func(name string, down bool, want qualify.State) {
		t.Helper()
		r.prober.down[name] = down
		before := len(r.states)
		r.run(rigPolicy.Frequency) // one probe, at most; a retry comes sooner
		if len(r.states) == before {
			t.Fatalf("%s: no state file write", name)
		}
		if _, s := r.saved(name); s.State != want {
			t.Fatalf("%s saved %+v, want %+v", name, s.State, want)
		}
	}
	r.run(Interval) // the first tick after steady: nothing to write
	step("a", true, qualify.State{Status: qualify.Reachable, Failures: 1})
	step("a", false, qualify.State{Status: qualify.Reachable})
	step("b", true, qualify.State{Status: qualify.Reachable, Failures: 1})
	step("b", true, qualify.State{Status: qualify.Unreachable, Failures: 2})
	step("b", false, qualify.State{Status: qualify.Reachable})
}

// TestSpacing: the least time between two state file writes of a size.
func TestSpacing(t *testing.T) {
	for _, c := range []struct {
		size   int64
		budget float64
		floor  time.Duration
		want   time.Duration
	}{
		{0, StatusBudget, Interval, Interval},
		{900_000, StatusBudget, Interval, Interval},                     // 10 s of 8 GB a day: 926 KB
		{37_000_000, StatusBudget, Interval, 399600 * time.Millisecond}, // a million contacts
		{100_000, ResultBudget, HistoryInterval, HistoryInterval},
		{37_000_000, ResultBudget, HistoryInterval, 6243750 * time.Millisecond}, // 104 minutes
	} {
		if got := spacing(c.size, c.budget, c.floor); got != c.want {
			t.Errorf("spacing(%d, %g, %v) = %v, want %v", c.size, c.budget, c.floor, got, c.want)
		}
	}
}

// TestKeeperRestart: after a crash (no Stop), the files restore every
// status and counter as of the last write into a new engine, although the
// last results are older than 10 F: the mark, seconds old, vouches for
// them. Without the mark they are stale, as before.
func TestKeeperRestart(t *testing.T) {
	r := newKeeperRig(t)
	r.steady()
	r.prober.down["b"], r.prober.down["c"] = true, true
	r.run(rigPolicy.Frequency + 2*Interval) // b and c: Failures 1
	r.prober.down["c"] = false
	r.run(rigPolicy.Frequency) // b Unreachable after its retry, c reset
	r.run(HistoryInterval - time.Minute)
	last := r.states[len(r.states)-1]
	if r.now.Sub(last) <= MaxSavedAgeOf(rigPolicy) {
		t.Fatalf("the last write, %v ago, is not older than 10 F", r.now.Sub(last))
	}
	want := map[string]qualify.State{"a": {Status: qualify.Reachable}, "b": {Status: qualify.Unreachable, Failures: 2},
		"c": {Status: qualify.Reachable}}
	restartAt := r.now.Add(Interval)
	if got := restoreInto(t, r, restartAt); len(got) != 3 {
		t.Fatalf("restored %v, want every contact", got)
	} else {
		for name, st := range want {
			if got[name] != st {
				t.Errorf("%s restored as %+v, want %+v", name, got[name], st)
			}
		}
	}
	if err := os.Remove(r.k.Path + MarkSuffix); err != nil {
		t.Fatal(err)
	}
	if got := restoreInto(t, r, restartAt); len(got) != 0 {
		t.Fatalf("restored %v without the mark, from a file %v old", got, restartAt.Sub(last))
	}
}

// TestKeeperMarkWaitsForDeferredChanges: while a status change waits
// for the state file's spacing (a file the size of a million contacts
// or more), no mark vouches for the file written before the change, so
// a crash cannot restore the old status as current; once the change is
// written, the marks resume.
func TestKeeperMarkWaitsForDeferredChanges(t *testing.T) {
	r := newKeeperRig(t)
	r.bytes = 74_000_000 // spacing at StatusBudget: 799 s
	last := r.steady()
	durable := r.e.Durable()
	r.prober.down["b"] = true
	var changed time.Time
	for changed.IsZero() {
		r.run(time.Second)
		if r.e.Durable() != durable {
			changed = r.now
		}
	}
	r.run(MaxSavedAgeOf(rigPolicy) + time.Minute)
	if n := r.writesSince(last.Add(time.Nanosecond)); n != 0 {
		t.Fatalf("the state file was rewritten within its spacing (%v)", r.states)
	}
	if s, _ := r.e.AoR("b"); s.Contacts[0].Status != qualify.Unreachable {
		t.Fatalf("b is %v, want Unreachable", s.Contacts[0].Status)
	}
	if _, s := r.saved("b"); s.Held.After(changed) {
		t.Errorf("the mark vouches for the file until %v, after b's failure at %v that it does not hold", s.Held, changed)
	}
	if got := restoreInto(t, r, r.now.Add(Interval)); got["b"].Status == qualify.Reachable {
		t.Errorf("a crash restores b as Reachable, Unreachable since %v: restored %v", changed, got)
	}
	r.run(spacing(r.bytes, StatusBudget, Interval))
	if n := r.writesSince(last.Add(time.Nanosecond)); n != 1 {
		t.Fatalf("%d writes of the deferred change, want 1 (%v)", n, r.states)
	}
	r.run(2 * Interval)
	if f, s := r.saved("b"); s.State.Status != qualify.Unreachable || !s.Held.After(f.Written) {
		t.Errorf("after the deferred write: b saved %+v, held %v, file written %v; want Unreachable and a later mark", s.State, s.Held, f.Written)
	}
}

// MaxSavedAgeOf is how old a state of p may be when it is restored.
func MaxSavedAgeOf(p qualify.Policy) time.Duration { return engine.MaxSavedAge * p.Frequency }

// restoreInto reads r's files as a restart does and restores them at
// at into a new engine of r's AoRs, returning the states restored.
func restoreInto(t *testing.T, r *keeperRig, at time.Time) map[string]qualify.State {
	t.Helper()
	e := restoredAt(t, r, at)
	got := map[string]qualify.State{}
	for _, a := range r.aors {
		s, _ := e.AoR(a.Name)
		if c := s.Contacts[0]; c.Status != qualify.NonQualified {
			got[a.Name] = qualify.State{Status: c.Status, Failures: uint32(c.Failures), Successes: uint32(c.Successes)}
		}
	}
	return got
}

// TestMark: a mark file reads back as written; a foreign, damaged,
// truncated or newer one is refused with the matching error; a mark
// applies only to the file it vouches for, and only when later.
func TestMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.mark")
	m := Mark{Of: written, At: written.Add(time.Minute)}
	if err := WriteMark(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMark(path)
	if err != nil || got != m {
		t.Fatalf("read %+v, %v; wrote %+v", got, err, m)
	}
	good := EncodeMark(m)
	newer := EncodeMark(m)
	newer[len(markMagic)] = 2
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"foreign", []byte("qfydstat..."), ErrForeign},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"damaged", append(good[:10:10], 0xFF), ErrCorrupt},
		{"flipped", append(append([]byte{}, good[:12]...), append([]byte{good[12] ^ 1}, good[13:]...)...), ErrCorrupt},
		{"newer", newer, ErrVersion},
	} {
		if _, err := DecodeMark(c.data); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		m    Mark
		want time.Time
	}{
		{"vouches", m, m.At},
		{"of another file", Mark{Of: written.Add(-time.Second), At: m.At}, written},
		{"earlier", Mark{Of: written, At: written.Add(-time.Second)}, written},
	} {
		f := &File{Header: Header{Written: written}, Contacts: []engine.Saved{{Held: written}}}
		f.Checked(c.m)
		if !f.Contacts[0].Held.Equal(c.want) {
			t.Errorf("%s: held %v, want %v", c.name, f.Contacts[0].Held, c.want)
		}
	}
}

// TestRestoreKeepsDrain: a contact draining when the daemon stops is
// restored draining, out of routing, its next probe at the end of the
// pause it asked for; restored after that end, it is not draining;
// restored with the clock stepped back 400 s, its pause lasts at most
// qualify_drain_max (300 s by default).
func TestRestoreKeepsDrain(t *testing.T) {
	r := newKeeperRig(t)
	r.run(2 * Interval)
	drain := observe.Observation{AoR: "a", Outcome: observe.Failed, Code: 503, RetryAfter: 60 * time.Second}
	if tally := r.e.Observe([]observe.Observation{drain}); tally.Accepted != 1 {
		t.Fatalf("observe: %+v", tally)
	}
	end := r.now.Add(60 * time.Second)
	r.run(Interval)
	back := end.Add(-400 * time.Second)
	for _, c := range []struct {
		at, until time.Time // until: zero for no drain
	}{{end.Add(-30 * time.Second), end}, {end.Add(time.Second), time.Time{}}, {back, back.Add(qualify.DefaultDrainMax)}} {
		e := restoredAt(t, r, c.at)
		a, _ := e.AoR("a")
		got := a.Contacts[0]
		drain := !c.until.IsZero()
		if (got.Phase == qualify.Draining) != drain || got.Routable == drain || got.Status != qualify.Reachable ||
			(drain && !got.NextProbe.Equal(c.until)) {
			t.Errorf("restored at %v: phase %v routable %v status %v next probe %v; want draining until %v",
				c.at.Sub(end), got.Phase, got.Routable, got.Status, got.NextProbe, c.until)
		}
	}
}

// restoredAt returns a new engine of r's AoRs with r's files restored at
// at, as a restart does.
func restoredAt(t *testing.T, r *keeperRig, at time.Time) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Prober: r.prober, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(r.aors); err != nil {
		t.Fatal(err)
	}
	f, _ := r.saved("a")
	e.Restore(f.Contacts, f.Seal)
	return e
}
