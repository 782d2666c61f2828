package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/atomicfile"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Keeper holds every source's last good list and its status. Its methods
// are safe for concurrent use.
type Keeper struct {
	// File, if set, keeps the last good lists across restarts (written
	// atomically after each applied change, their passwords sealed: see
	// seal.go).
	File string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Driver builds a source's driver; nil means New.
	Driver func(*pjsip.Source) (Driver, error)

	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one source's state.
type entry struct {
	src  *pjsip.Source // as last configured
	good []pjsip.Object
	// known: good holds a list (possibly empty) read or restored.
	known bool
	// sealed: good was restored with its secrets sealed, opened when the
	// source is configured (its connection string is the key); openErr
	// is why a restored list could not be opened, and was dropped.
	sealed  bool
	openErr error
	// pending is a read newer than good, not yet applied.
	pending    []pjsip.Object
	hasPending bool
	up         bool
	last       time.Time // last successful read
	next       time.Time // next refresh
	errors     uint64
	lastErr    string
}

// Status is one source's state, for the metrics and the API.
type Status struct {
	// Name and Driver are the section's.
	Name, Driver string
	// Up is whether the last read succeeded and its list was taken.
	Up bool
	// AoRs counts the AoRs of the list in use.
	AoRs int
	// LastSuccess is when a read last succeeded; zero if never.
	LastSuccess time.Time
	// Errors counts reads that failed, returned garbage or were refused
	// by the shrink guard.
	Errors uint64
	// LastError is the last read's error, "" after a good read.
	LastError string
	// RefreshInterval is the section's refresh_interval.
	RefreshInterval time.Duration
}

// ErrShrink is a source's read refused by the shrink guard.
var ErrShrink = errors.New("refused")

func (k *Keeper) now() time.Time {
	if k.Now == nil {
		return time.Now()
	}
	return k.Now()
}

func (k *Keeper) entry(src *pjsip.Source) *entry {
	if k.entries == nil {
		k.entries = map[string]*entry{}
	}
	e, ok := k.entries[src.Name]
	if !ok {
		e = &entry{}
		k.entries[src.Name] = e
	}
	if e.src != nil && !sameList(e.src, src) {
		*e = entry{} // another router: its last list is not this one's
	}
	e.src = src
	if e.sealed {
		e.open()
	}
	return e
}

// open opens the secrets of a restored list with its source's
// connection string; a list that does not open is dropped.
func (e *entry) open() {
	list, err := openList(sealKey(e.src.DSN.Reveal()), e.src.Name, e.good)
	if err != nil {
		*e = entry{src: e.src, openErr: err}
		return
	}
	e.good, e.sealed = list, false
}

// sameList reports whether a and b read the same router's list.
func sameList(a, b *pjsip.Source) bool {
	return a.Driver == b.Driver && a.URL == b.URL && a.Path == b.Path && a.DSNFile == b.DSNFile &&
		slices.Equal(a.Sets, b.Sets)
}

// Round is one configuration load: the lists each source gave it, and
// what a log should say about them.
type Round struct {
	k      *Keeper
	ctx    context.Context
	read   bool // read every source now (a start or a reload)
	force  bool // no shrink guard
	used   map[string][]pjsip.Object
	seen   []*pjsip.Source
	Notice []string // warnings: a source kept its last good list, and why
}

// Round starts a load. With read, every source is read now (a start or
// a reload); without, each uses its pending or last good list and only
// a source never read is read. force lifts the shrink guard.
func (k *Keeper) Round(ctx context.Context, read, force bool) *Round {
	return &Round{k: k, ctx: ctx, read: read, force: force, used: map[string][]pjsip.Object{}}
}

// Import is the round's pjsip.Importer.
func (r *Round) Import(src *pjsip.Source) ([]pjsip.Object, error) {
	r.seen = append(r.seen, src)
	k := r.k
	k.mu.Lock()
	e := k.entry(src)
	if !r.read && (e.hasPending || e.known) {
		list := e.good
		if e.hasPending {
			list = e.pending
		}
		k.mu.Unlock()
		r.used[src.Name] = list
		return list, nil
	}
	k.mu.Unlock()
	list, err := k.readOne(r.ctx, src, r.force)
	if err != nil {
		return r.fallBack(src, err)
	}
	r.used[src.Name] = list
	return list, nil
}

// fallBack returns the last good list of a source whose read failed,
// or the error when it has none.
func (r *Round) fallBack(src *pjsip.Source, err error) ([]pjsip.Object, error) {
	k := r.k
	k.mu.Lock()
	e := k.entry(src)
	good, known, openErr := e.good, e.known, e.openErr
	k.mu.Unlock()
	if !known && openErr != nil {
		return nil, fmt.Errorf("%w, and the last good list cannot be used: %v", err, openErr)
	}
	if !known {
		return nil, fmt.Errorf("%w, and there is no last good list to use", err)
	}
	r.Notice = append(r.Notice, fmt.Sprintf("source %s: %v; keeping the last good list (%d AoRs)", src.Name, err, countAoRs(good)))
	r.used[src.Name] = good
	return good, nil
}

// readOne reads src and applies the shrink guard; the status follows.
func (k *Keeper) readOne(ctx context.Context, src *pjsip.Source, force bool) ([]pjsip.Object, error) {
	list, err := k.read(ctx, src)
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entry(src)
	e.next = k.now().Add(src.RefreshInterval)
	if err == nil && !force && e.known {
		err = shrink(countAoRs(e.good), countAoRs(list))
	}
	if err != nil {
		e.up, e.errors, e.lastErr = false, e.errors+1, err.Error()
		return nil, err
	}
	e.up, e.last, e.lastErr = true, k.now(), ""
	return list, nil
}

// read reads src once with its driver, and checks every value as the
// same option in a file is checked, whatever the driver: a list with a
// broken value (a destination that is no SIP URI, a row Asterisk would
// refuse) fails the read, counted, and the last good list stays, rather
// than failing every reload it would be applied in. A list equal to the
// last good one, which a configuration was built with (in this run or,
// restored, an earlier one), is not checked again: that is a refresh's
// usual read.
func (k *Keeper) read(ctx context.Context, src *pjsip.Source) ([]pjsip.Object, error) {
	newDriver := k.Driver
	if newDriver == nil {
		newDriver = New
	}
	d, err := newDriver(src)
	if err != nil {
		return nil, err
	}
	objs, err := d.Read(ctx)
	if err != nil {
		return nil, err
	}
	if k.isGood(src, objs) {
		return objs, nil
	}
	if err := pjsip.CheckObjects(objs); err != nil {
		return nil, errors.New(pjsip.Brief(err))
	}
	return objs, nil
}

// isGood reports whether list is src's last good list.
func (k *Keeper) isGood(src *pjsip.Source, list []pjsip.Object) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entry(src)
	return e.known && equalLists(list, e.good)
}

// shrink is the source's own shrink guard (qualify-semantics §8's rule
// for a reload): a list that suddenly has no AoR, or fewer than half of
// the AoRs of the last good one, is more likely a router's fault than
// an edit.
func shrink(was, now int) error {
	switch {
	case was > 0 && now == 0:
		return fmt.Errorf("%w: the list has no AoR and would drop all %d imported (a forced reload takes it)", ErrShrink, was)
	case 2*now < was:
		return fmt.Errorf("%w: the list has %d AoRs and would drop more than half of the %d imported (a forced reload takes it)", ErrShrink, now, was)
	}
	return nil
}

func countAoRs(list []pjsip.Object) int {
	n := 0
	for _, o := range list {
		if o.Type == "aor" {
			n++
		}
	}
	return n
}

// Commit records the round's lists as the last good ones, once its
// configuration is applied, forgets the sources no longer configured,
// and writes the file.
func (r *Round) Commit() error {
	k := r.k
	k.mu.Lock()
	keep := map[string]*entry{}
	for _, src := range r.seen {
		e := k.entry(src)
		e.good, e.known, e.pending, e.hasPending = r.used[src.Name], true, nil, false
		keep[src.Name] = e
	}
	k.entries = keep
	saved := k.snapshot()
	k.mu.Unlock()
	return k.save(saved)
}

// Refresh reads every source whose refresh_interval has passed and
// reports whether one of them changed; the changes wait, pending, for
// a round without read; a read of the last good list again drops the
// change pending. A read that fails or is refused keeps the last good
// list; its error is returned in notices.
func (k *Keeper) Refresh(ctx context.Context) (changed bool, notices []string) {
	for _, src := range k.due() {
		list, err := k.readOne(ctx, src, false)
		if err != nil {
			notices = append(notices, fmt.Sprintf("source %s: %v; keeping the last good list", src.Name, err))
			continue
		}
		k.mu.Lock()
		e := k.entry(src)
		if equalLists(list, e.good) {
			e.pending, e.hasPending = nil, false // the router is back to the applied list
		} else {
			e.pending, e.hasPending, changed = list, true, true
		}
		k.mu.Unlock()
	}
	return changed, notices
}

// due returns the sources whose next refresh has come.
func (k *Keeper) due() []*pjsip.Source {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	var out []*pjsip.Source
	for _, e := range k.entries {
		if e.src != nil && !now.Before(e.next) {
			out = append(out, e.src)
		}
	}
	return out
}

// Next is when the next refresh is due; zero without a source.
func (k *Keeper) Next() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	var next time.Time
	for _, e := range k.entries {
		if e.src != nil && (next.IsZero() || e.next.Before(next)) {
			next = e.next
		}
	}
	return next
}

func equalLists(a, b []pjsip.Object) bool {
	return slices.EqualFunc(a, b, func(x, y pjsip.Object) bool {
		return x.Type == y.Type && x.Name == y.Name && slices.Equal(x.Options, y.Options)
	})
}

// Status returns every source's state, sorted by name.
func (k *Keeper) Status() []Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []Status{}
	for name, e := range k.entries {
		if e.src == nil {
			continue
		}
		out = append(out, Status{Name: name, Driver: e.src.Driver, Up: e.up, AoRs: countAoRs(e.good),
			LastSuccess: e.last, Errors: e.errors, LastError: e.lastErr, RefreshInterval: e.src.RefreshInterval})
	}
	slices.SortFunc(out, func(a, b Status) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// saved is the file's content: each source's last good list. Version 2
// seals the secrets (seal.go); version 1 holds them in clear and is
// still read.
type saved struct {
	Version int                   `json:"version"`
	Sources map[string]savedEntry `json:"sources"`
}

type savedEntry struct {
	Driver  string         `json:"driver"`
	URL     string         `json:"url,omitempty"`
	Path    string         `json:"path,omitempty"`
	DSNFile string         `json:"dsn_file,omitempty"`
	Sets    []int          `json:"sets,omitempty"`
	Time    time.Time      `json:"time"`
	Objects []pjsip.Object `json:"objects"`
}

// snapshot copies what the file keeps; k.mu held.
func (k *Keeper) snapshot() saved {
	s := saved{Version: 2, Sources: map[string]savedEntry{}}
	for name, e := range k.entries {
		s.Sources[name] = savedEntry{Driver: e.src.Driver, URL: e.src.URL, Path: e.src.Path, DSNFile: e.src.DSNFile,
			Sets: e.src.Sets, Time: e.last, Objects: sealList(sealKey(e.src.DSN.Reveal()), name, e.good)}
	}
	return s
}

// save writes the file atomically (atomicfile.Write: the directory is
// fsynced after the rename).
func (k *Keeper) save(s saved) error {
	if k.File == "" {
		return nil
	}
	return atomicfile.Write(k.File, func(w io.Writer) error { return json.NewEncoder(w).Encode(s) })
}

// Restore reads the file's last good lists: a source configured with
// the same driver, URL, path or dsn_file and sets starts from its list when its
// router cannot be read. A missing file is no error.
func (k *Keeper) Restore() error {
	if k.File == "" {
		return nil
	}
	data, err := os.ReadFile(k.File)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s saved
	if err := json.Unmarshal(data, &s); err != nil || s.Version != 1 && s.Version != 2 {
		return fmt.Errorf("%s: not a sources file of version 1 or 2", k.File)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.entries = map[string]*entry{}
	for name, se := range s.Sources {
		src := &pjsip.Source{Name: name, Driver: se.Driver, URL: se.URL, Path: se.Path, DSNFile: se.DSNFile, Sets: se.Sets}
		k.entries[name] = &entry{src: src, good: se.Objects, known: true, last: se.Time, sealed: s.Version >= 2}
	}
	return nil
}
