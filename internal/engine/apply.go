package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// ErrConfig is wrapped by every error Apply returns.
var ErrConfig = errors.New("invalid AoR set")

// Apply makes aors the configured set, with the contract's reload rule: a
// contact whose AoR, URI and options did not change keeps its status,
// counters and schedule; a changed contact starts again as NonQualified; a
// new one starts as NonQualified with its first probe delayed at random; a
// removed one emits Removed. An invalid set changes nothing.
func (e *Engine) Apply(aors []AoR) error {
	return e.ApplyFunc(len(aors), func(i int) *AoR { return &aors[i] })
}

// ApplyFunc is Apply of the n AoRs at(0) to at(n-1). It reads them
// through at during the call only, and keeps no pointer to them or their
// Contacts slices, so a caller can hand it the AoRs inside its own
// definitions: copying a million AoRs out of the configuration for
// Apply, both alive, was a fifth of the daemon's start peak RSS.
// at must return the same AoR, unchanged, for an index throughout the
// call.
func (e *Engine) ApplyFunc(n int, at func(i int) *AoR) error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	d := defs{n: n, at: at}
	total := 0 // contacts in the new set
	for i := range n {
		total += len(at(i).Contacts)
	}
	next, states, err := newAoRs(d, total)
	if err != nil {
		return err
	}
	p := e.plan(d, total)
	p.away = e.elsewhere(d, total)
	p.histNames = e.histories(states, &p)
	order := e.sorted(states, &p)
	prev := e.install(d, next, states, order, &p, total)
	clear(prev) // without mu: no reader has it now (see sorted)
	e.spare = prev[:0]
	return nil
}

// defs are the AoRs of one ApplyFunc: n of them, the i-th at at(i).
type defs struct {
	n  int
	at func(i int) *AoR
}

// install puts the new set in place, as Apply planned it, with the engine
// locked, and returns the old order.
func (e *Engine) install(aors defs, next map[string]*aorState, states []aorState, order []*aorState, p *reloadPlan, total int) []*aorState {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &reload{now: now, fresh: e.reserve(total)}
	off := 0
	for i := range aors.n {
		uris := aors.at(i).Contacts
		e.adopt(r, &states[i], p.old(i), uris, p.slots(off, len(uris)), p.awayOf(off, len(uris)))
		off += len(uris)
	}
	if p.found < len(e.aors) {
		for name, old := range e.aors {
			if _, ok := next[name]; !ok {
				e.retire(old, nil, now)
			}
		}
	}
	e.place(r.fresh, now)
	prev := e.order
	e.aors, e.order, e.histNames = next, order, p.histNames
	e.sum = r.sum
	e.dests = nil // the next Observe indexes the new set
	return prev
}

// histories gives the AoRs of states, a new set, their histories, and
// returns their names in name order: an AoR defined before keeps its
// own, and while fewer than Config.HistoryAoRs have one, the others
// without one get a new one in configuration order. It reads the old
// AoRs' histories without mu: only Apply sets them, and the caller holds
// applyMu.
func (e *Engine) histories(states []aorState, p *reloadPlan) []string {
	if e.cfg.HistoryAoRs <= 0 {
		return nil
	}
	var names []string
	for i := range states {
		if old := p.old(i); old != nil && old.hist != nil {
			states[i].hist = old.hist
			names = append(names, states[i].name)
		}
	}
	for i := range states {
		if len(names) >= e.cfg.HistoryAoRs {
			break
		}
		if states[i].hist == nil {
			states[i].hist = newHistory(e.cfg.HistoryBucket, e.cfg.HistoryLength)
			names = append(names, states[i].name)
		}
	}
	slices.Sort(names)
	return names
}

// newAoRs validates aors and returns their states, without contacts: in
// one array in the order of aors, and by name. The map also finds names
// defined twice (a second map of a million names for that check
// was a tenth of the load's peak RSS); the array spares Apply a lookup
// per AoR with the engine locked, and the allocator a million objects.
// Each AoR's slot list has room for its contacts in one array shared by
// all, so that filling it allocates nothing.
func newAoRs(aors defs, total int) (map[string]*aorState, []aorState, error) {
	in := newInterner()
	next := make(map[string]*aorState, aors.n)
	states := make([]aorState, aors.n)
	ids := make([]uint32, 0, total) // every AoR's slot list, end to end
	names, off := nameArena(aors), 0
	for i := range aors.n {
		def := aors.at(i)
		if def.Name == "" {
			return nil, nil, fmt.Errorf("%w: AoR #%d has no name", ErrConfig, i+1)
		}
		name := names[off : off+len(def.Name)]
		off += len(name)
		if _, dup := next[name]; dup {
			return nil, nil, fmt.Errorf("%w: AoR %q defined twice", ErrConfig, name)
		}
		if err := validateAoR(def); err != nil {
			return nil, nil, err
		}
		n := len(def.Contacts)
		states[i] = aorState{name: name, policy: intern(in.policies, def.PolicyValue()), probe: intern(in.probes, def.OptionsValue()), ids: ids[:0:n]}
		ids = ids[n:n]
		next[name] = &states[i]
	}
	return next, states, nil
}

// nameArena returns the names of aors end to end in one new string, of
// which the engine keeps substrings, never its caller's strings: those
// are often parts of larger ones that would stay alive with them (a
// pjsip AoR's name shares one string with its contacts, which the engine
// copies: about 48 B per AoR kept for nothing). One allocation
// per set; the set replaced lets go of its own.
func nameArena(aors defs) string {
	n := 0
	for i := range aors.n {
		n += len(aors.at(i).Name)
	}
	var b strings.Builder
	b.Grow(n)
	for i := range aors.n {
		b.WriteString(aors.at(i).Name)
	}
	return b.String()
}

// reserve sizes the table and the schedule for the total contacts of a new
// set that the free slots cannot hold, so that a large first load allocates them
// once instead of doubling (the copies were an eighth of the
// load's peak RSS). It returns an empty list of new contacts with room
// for those the table does not hold yet. Called with mu held.
func (e *Engine) reserve(total int) []newContact {
	if n := total - len(e.free); n > cap(e.slots) {
		e.slots = slices.Grow(e.slots, n-len(e.slots))
		e.sched.Reserve(n)
	}
	return make([]newContact, 0, max(total-(len(e.slots)-len(e.free)), 0))
}

// newContact is a contact new in an Apply. Its slot is allocated by place, once
// the whole set has been read, in the order of the first probes.
type newContact struct {
	a     *aorState
	uri   string
	delay time.Duration // of its first probe; 0 when it is never probed
	away  bool          // another node probes it (SetProbed)
	at    int32         // its index in a.ids
	seq   uint32        // its rank in the configuration, for ties
}

// place gives the new contacts their slots in the order their first probes
// are due, with a copy of their URIs made in that order, and schedules
// those probes. A contact's probe then reads a slot and a URI next to
// those of the probe before: in a table of 100,000 contacts probed in
// random order, the cache and TLB misses of the slot and the URI were a
// fifth of the CPU per probe. The delays themselves were drawn
// in configuration order, as the contract has them, and contacts due at
// the same time keep that order. Called with mu held.
func (e *Engine) place(fresh []newContact, now time.Time) {
	slices.SortFunc(fresh, func(x, y newContact) int {
		if x.delay != y.delay {
			return cmp.Compare(x.delay, y.delay)
		}
		return cmp.Compare(x.seq, y.seq)
	})
	for i := range fresh {
		f := &fresh[i]
		id := e.alloc(f.a, strings.Clone(f.uri))
		f.a.ids[f.at] = id
		e.slots[id].elsewhere = f.away
		if f.a.policy.Enabled() && !f.away {
			e.schedule(id, now.Add(f.delay))
		}
	}
}

// reloadPlan is what Apply works out before it locks the engine: each
// new AoR's old state, and each new contact's old slot. Finding them reads
// an old slot and compares URIs per contact, cache misses all (slots are
// in probe order, AoRs in configuration order): with the engine locked,
// they were half of the 1.4 s a reload of a million contacts stopped
// every probe for.
type reloadPlan struct {
	olds  []*aorState // by AoR of the new set; nil: a new name (or a first load)
	prev  []uint32    // by contact of the new set, AoR after AoR; noSlot: new
	found int         // old AoRs that the new set defines again
	// away are the new set's contacts another node probes, as prev
	// (nil: none; see Engine.elsewhere).
	away []bool
	// histNames are the names of the new set's AoRs with a history, in
	// name order.
	histNames []string
}

// noSlot marks a contact that had no slot.
const noSlot = ^uint32(0)

// old returns the old state of the i-th new AoR, or nil.
func (p *reloadPlan) old(i int) *aorState {
	if p.olds == nil {
		return nil
	}
	return p.olds[i]
}

// slots returns the old slots of the n contacts from the off-th on; nil
// when none had one.
func (p *reloadPlan) slots(off, n int) []uint32 {
	if p.prev == nil {
		return nil
	}
	return p.prev[off : off+n]
}

// awayOf returns the away flags of the n contacts from the off-th on;
// nil when none is away.
func (p *reloadPlan) awayOf(off, n int) []bool {
	if p.away == nil {
		return nil
	}
	return p.away[off : off+n]
}

// plan finds the old state of every AoR of aors and the old slot of every
// one of their total contacts. It reads aors, the AoRs' ids and the slots' URIs without mu:
// only Apply changes them, and the caller holds applyMu.
func (e *Engine) plan(aors defs, total int) reloadPlan {
	if len(e.aors) == 0 {
		return reloadPlan{}
	}
	p := reloadPlan{olds: make([]*aorState, aors.n), prev: make([]uint32, total)}
	off := 0
	for i := range aors.n {
		def := aors.at(i)
		uris := def.Contacts
		old := e.aors[def.Name]
		p.olds[i] = old
		var s oldSlots
		if old != nil {
			p.found++
			e.oldSlotsOf(old, &s)
		}
		for k, u := range uris {
			id, had := s.take(u)
			if !had {
				id = noSlot
			}
			p.prev[off+k] = id
		}
		off += len(uris)
	}
	return p
}

// reload is the work of one Apply with the engine locked: the new
// contacts, for place, and the counts of the new set, made as its
// contacts are placed. Counting them afterwards walked the table in
// configuration order, a cache miss per contact: 0.2 s of the lock held
// for a million contacts.
type reload struct {
	now   time.Time
	fresh []newContact
	sum   Summary
}

// adopt fills a with slots for uris: kept from old where prev, the plan's
// old slots of uris (nil: none), holds one and the contact is unchanged,
// renewed where its options changed; new contacts are appended to
// r.fresh. A kept contact keeps its away flag (the Probed test answers
// alike for it); a renewed or new one takes away's. old's other contacts
// are removed. Called with mu held.
func (e *Engine) adopt(r *reload, a, old *aorState, uris []string, prev []uint32, away []bool) {
	same := old != nil && sameOptions(old.policy, a.policy, old.probe, a.probe)
	for k, u := range uris {
		id := noSlot
		if prev != nil {
			id = prev[k]
		}
		elsewhere := awayAt(away, k)
		switch {
		case id != noSlot && same:
			e.keep(a, id)
			r.sum.ByStatus[e.slots[id].state.Status]++
			if e.slots[id].state.Draining {
				r.sum.Draining++
			}
			elsewhere = e.slots[id].elsewhere
		case id != noSlot:
			e.renew(a, id, r.now, elsewhere)
			r.sum.ByStatus[qualify.NonQualified]++
		default:
			r.fresh = append(r.fresh, newContact{a: a, uri: u, delay: e.join(a, 0), away: elsewhere, at: int32(len(a.ids) - 1), seq: uint32(len(r.fresh))})
			r.sum.ByStatus[qualify.NonQualified]++
		}
		if elsewhere {
			r.sum.Elsewhere++
		}
	}
	a.noteAvailable(r.now)
	r.sum.AoRs++
	r.sum.Routable += int(a.routable)
	if a.drainHeld() {
		r.sum.AoRsDrainHeld++
	}
	if a.available() {
		r.sum.AoRsAvailable++
	}
	if old != nil {
		e.retire(old, rest(old.ids, prev), r.now)
		if old.available() != a.available() {
			e.publish(Event{Kind: AvailabilityChanged, Time: r.now, AoR: a.name, Available: a.available()})
		}
	}
}

// sameOptions is the reload rule's test of an AoR's options
// (qualify-semantics §8): a contact keeps its state when its AoR's
// qualify policy and request-shaping options are both unchanged, p and o
// before, q and r after (a TLS transport's by its settings: probe.Options.Equal).
func sameOptions(p, q *qualify.Policy, o, r *probe.Options) bool {
	return *p == *q && o.Equal(r)
}

// keep moves slot id, unchanged, into a.
func (e *Engine) keep(a *aorState, id uint32) {
	e.slots[id].join(a)
	a.ids = append(a.ids, id)
	if e.routable(id) {
		a.routable++
	}
	if e.slots[id].state.Draining {
		a.draining++
	}
}

// renew replaces the contact in slot id, whose options changed, with a new
// NonQualified one, probed elsewhere when away, publishing the status
// reset.
func (e *Engine) renew(a *aorState, id uint32, now time.Time, away bool) {
	was := e.slots[id].state.Status
	uri := e.slots[id].uri
	e.drop(id, ErrRemoved)
	nid := e.alloc(a, uri)
	e.slots[nid].elsewhere = away
	e.start(a, nid, now)
	if was != qualify.NonQualified {
		ev := e.contactEvent(StatusChanged, nid, was, now)
		e.publish(ev)
		a.noteChange(&ev)
	}
}

// start adds the new contact in slot id to a and, unless it is probed
// elsewhere, schedules its first probe at a random delay in [0, min(F,
// max_initial_qualify_time)).
func (e *Engine) start(a *aorState, id uint32, now time.Time) {
	delay := e.join(a, id)
	if a.policy.Enabled() && !e.slots[id].elsewhere {
		e.schedule(id, now.Add(delay))
	}
}

// join adds a new contact, in slot id, to a and returns the delay of its
// first probe: random in [0, min(F, max_initial_qualify_time)), zero when
// a's contacts are not probed.
func (e *Engine) join(a *aorState, id uint32) time.Duration {
	a.ids = append(a.ids, id)
	a.routable++ // NonQualified is routable
	if !a.policy.Enabled() {
		return 0
	}
	return a.policy.FirstDelay(e.cfg.MaxInitialQualifyTime, e.cfg.Rand())
}

// schedule sets the next probe of slot id at due.
func (e *Engine) schedule(id uint32, due time.Time) {
	e.slots[id].wait(e.stamp(due))
	e.sched.Set(id, due)
}

// retire removes the contacts of old whose slots are in gone (every contact
// of old when gone is nil), in configuration order, publishing Removed for
// each, and the AoR's loss of availability when old itself is gone.
func (e *Engine) retire(old *aorState, gone []uint32, now time.Time) {
	whole := gone == nil
	if whole {
		gone = old.ids
	}
	for _, id := range gone {
		ev := e.contactEvent(StatusChanged, id, e.slots[id].state.Status, now)
		ev.To, ev.Routable, ev.Next = qualify.Removed, false, time.Time{}
		e.publish(ev)
		if !whole {
			old.noteChange(&ev)
		}
		e.drop(id, ErrRemoved)
	}
	if whole && old.available() {
		e.publish(Event{Kind: AvailabilityChanged, Time: now, AoR: old.name, Available: false})
	}
}

// oldSlots are an AoR's contacts before a reload, looked up by URI as the
// new definition's contacts take them: a linear scan of an array on the
// stack for the usual handful, a map beyond smallSet.
type oldSlots struct {
	n   int               // not taken yet (small AoRs): ids[:n], uri[:n]
	ids [smallSet]uint32  // in the AoR's order
	uri [smallSet]string  // their URIs
	m   map[string]uint32 // not taken yet (large AoRs)
}

// oldSlotsOf indexes old's contacts into s. Called with mu held.
func (e *Engine) oldSlotsOf(old *aorState, s *oldSlots) {
	if len(old.ids) > smallSet {
		s.m = make(map[string]uint32, len(old.ids))
		for _, id := range old.ids {
			s.m[e.slots[id].uri] = id
		}
		return
	}
	s.n = copy(s.ids[:], old.ids)
	for i, id := range old.ids {
		s.uri[i] = e.slots[id].uri
	}
}

// take removes and returns the old slot of uri, if there is one.
func (s *oldSlots) take(uri string) (uint32, bool) {
	if s.m != nil {
		id, ok := s.m[uri]
		delete(s.m, uri)
		return id, ok
	}
	i := slices.Index(s.uri[:s.n], uri)
	if i < 0 {
		return 0, false
	}
	id := s.ids[i]
	copy(s.ids[i:s.n], s.ids[i+1:s.n])
	copy(s.uri[i:s.n], s.uri[i+1:s.n])
	s.n--
	s.uri[s.n] = ""
	return id, true
}

// rest returns the slots of old that taken does not hold, in old's order;
// never nil.
func rest(old, taken []uint32) []uint32 {
	n := 0
	for _, id := range taken {
		if id != noSlot {
			n++
		}
	}
	out := []uint32{}
	if n == len(old) {
		return out // every contact stays: the usual reload
	}
	stays := func(id uint32) bool { return slices.Contains(taken, id) }
	if len(taken) > smallSet {
		set := make(map[uint32]bool, len(taken))
		for _, id := range taken {
			set[id] = true
		}
		stays = func(id uint32) bool { return set[id] }
	}
	for _, id := range old {
		if !stays(id) {
			out = append(out, id)
		}
	}
	return out
}

// drop takes slot id out of the table and the schedule. A slot whose probe
// is dispatched or running becomes a zombie until the scheduler releases
// it. Called with mu held.
func (e *Engine) drop(id uint32, reason error) {
	e.dismiss(id, reason)
	if e.sched.Remove(id) {
		e.slots[id].zombie = true
		return
	}
	e.release(id)
}

func validateAoR(a *AoR) error {
	p := a.PolicyValue()
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: AoR %q: %w", ErrConfig, a.Name, err)
	}
	for _, u := range a.Contacts {
		if u == "" {
			return fmt.Errorf("%w: AoR %q: empty contact URI", ErrConfig, a.Name)
		}
	}
	if u, ok := duplicate(a.Contacts); ok {
		return fmt.Errorf("%w: AoR %q: contact %q listed twice", ErrConfig, a.Name, u)
	}
	return nil
}

// smallSet is the size up to which a linear scan replaces a map: an AoR
// usually has one contact, and a map per AoR made a million-AoR load
// allocate two maps per AoR (the load's peak RSS).
const smallSet = 16

// duplicate returns the first URI listed twice in uris.
func duplicate(uris []string) (string, bool) {
	if len(uris) <= smallSet {
		for i, u := range uris {
			if slices.Contains(uris[:i], u) {
				return u, true
			}
		}
		return "", false
	}
	seen := make(map[string]bool, len(uris))
	for _, u := range uris {
		if seen[u] {
			return u, true
		}
		seen[u] = true
	}
	return "", false
}

// interner shares one copy of equal policies and probe options among the
// AoRs of one Apply.
type interner struct {
	policies map[qualify.Policy]*qualify.Policy
	probes   map[probe.Options]*probe.Options
}

func newInterner() *interner {
	return &interner{policies: map[qualify.Policy]*qualify.Policy{}, probes: map[probe.Options]*probe.Options{}}
}

// intern returns the shared copy of v in m, adding one when there is none.
// Only a new one is allocated: taking v's address instead made every call
// copy v to the heap, two garbage objects per AoR of every load.
func intern[T comparable](m map[T]*T, v T) *T {
	if q, ok := m[v]; ok {
		return q
	}
	q := new(T)
	*q = v
	m[v] = q
	return q
}
