package cluster

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// ledger is the cluster's decision state and its rules, without I/O:
// the members as they announced themselves (with their runs), every
// node's votes and the cluster's statuses (tally), the recorded
// verdicts, this node's writes to make and its votes awaiting their
// echo, and the keys of nodes not in nodes=. Its inputs are its
// methods: a vote, a record, a membership change, a leading edge, a
// report of this node's status. Each returns its outputs: the verdicts
// to hand the Verdict hook, and whether it queued writes for the
// publisher, which takes them (take). The Cluster does the I/O around
// it (watches, publisher, lease, hooks) and holds no verdict state.
//
// mu guards every field but nodes. A method never calls out of the ledger, so
// mu is the innermost lock: the Cluster takes leadingMu, then
// verdictMu, then mu; Cluster.mu is never held with it.
type ledger struct {
	mu    sync.Mutex
	self  string          // this node's name
	run   string          // this node's run (announcement.Run)
	nodes map[string]bool // nodes=; set by newLedger, read without mu

	members  map[string]Member         // every node seen, by name
	tally    *tally                    // the votes and the cluster's statuses
	recorded map[string]qualify.Status // the verdicts bucket, as last seen
	seeded   bool                      // the first pass over the verdicts bucket is done
	leading  bool                      // the lease's last edge: the leader records verdicts

	votesOut   map[string]qualify.Status            // this node's votes to publish, by contact
	drains     map[string]bool                      // the contacts this node's votes say draining
	recordsOut map[string]qualify.Status            // the verdicts to record, by contact (leader)
	strays     map[string]map[string]qualify.Status // by bucket, the keys of foreign nodes the leader removes
	sending    int                                  // the writes the publisher is making now (stats.go)
	echo       map[string]qualify.Status            // this node's votes reported and not yet seen back
	echoAt     time.Time                            // when one of them last came back, or echo last became non-empty

	foreign map[string]bool // the nodes not in nodes= seen

	// memberRevs (by node) and recordRevs (by contact) are the KV
	// revision of the members' and the verdicts' entry last applied, a
	// removal's marker included; a vote's is in its mark. older counts
	// the entries dropped as older than those (newerLocked).
	memberRevs map[string]uint64
	recordRevs map[string]uint64
	older      uint64
}

// newLedger returns the ledger of node self, in run run, of a cluster
// of nodes deciding by q over vantages vantages.
func newLedger(self, run string, nodes []Node, q Quorum, vantages int) *ledger {
	l := &ledger{self: self, run: run, nodes: map[string]bool{}, members: map[string]Member{},
		tally: newTally(q, vantages), recorded: map[string]qualify.Status{},
		votesOut: map[string]qualify.Status{}, recordsOut: map[string]qualify.Status{}, drains: map[string]bool{},
		strays: map[string]map[string]qualify.Status{}, echo: map[string]qualify.Status{}, foreign: map[string]bool{},
		memberRevs: map[string]uint64{}, recordRevs: map[string]uint64{}}
	for _, n := range nodes {
		l.nodes[n.Name] = true
	}
	return l
}

// newerLocked reports whether an entry at KV revision rev, of the key
// whose last applied revision revs holds, is to be applied, and records
// rev as the key's last applied: no key goes back to a revision older
// than one applied. A watch may run on a replica still catching up (a
// restarted node's server, on its old store), which delivers the entries
// it holds, older than those this node already applied: another node's
// announcement of its previous run (whose votes would count again), a
// vote or a record since replaced or removed. A watch started again
// delivers the current entries at their own revisions, equal to those
// applied: applied again, to the same effect. The revisions cost a
// number per member, per vote (its mark) and per contact recorded; a
// vote's removal leaves none, so an older copy of a removed vote counts
// again until its voter votes: only in its voter's current run (a
// previous run's never counts), that is on a contact it stopped
// qualifying, which no sink follows. l.mu held.
func (l *ledger) newerLocked(revs map[string]uint64, key string, rev uint64) bool {
	if last, ok := revs[key]; ok && rev < last {
		l.older++
		return false
	}
	revs[key] = rev
	return true
}

// ours reports whether name is one of nodes=: the one check, the
// Cluster's too (its routes, the lease's holder).
func (l *ledger) ours(name string) bool { return l.nodes[name] }

// report queues this node's status of contact as its vote, awaiting its
// echo (Cluster.Report), draining when its peer asked for a pause.
func (l *ledger) report(contact string, s qualify.Status, draining bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.votesOut[contact] = s
	if draining {
		l.drains[contact] = true
	} else {
		delete(l.drains, contact)
	}
	if len(l.echo) == 0 {
		l.echoAt = now
	}
	l.echo[contact] = voteOf(s)
}

// sawForeign records node, not one of nodes=, as seen holding no key the
// leader removes (the lease's holder: the candidates remove that key),
// and returns the outcome that logs it the first time.
func (l *ledger) sawForeign(node string) outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.foreign[node] {
		return outcome{}
	}
	l.foreign[node] = true
	return outcome{Foreign: node}
}

// stray records key of bucket, written by node, which is not one of
// nodes=: present (the leader removes it) or gone. It reports whether
// node was seen for the first time.
func (l *ledger) stray(bucket, key, node string, gone bool) (first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first = !l.foreign[node]
	l.foreign[node] = true
	if gone {
		delete(l.strays[bucket], key)
		return first
	}
	if l.strays[bucket] == nil {
		l.strays[bucket] = map[string]qualify.Status{}
	}
	l.strays[bucket][key] = qualify.Removed
	return first
}

// outcome is what an input to the ledger caused.
type outcome struct {
	// Verdicts are the changes of the cluster's status, for the hook.
	Verdicts []Verdict
	// Write is whether a write was queued for the publisher.
	Write bool
	// Foreign names a node not in nodes= seen for the first time, to
	// log; "" for none.
	Foreign string
}

// vote counts node's status of contact (its key: the entry's, at KV
// revision rev), cast in node's run run; an entry older than the key's
// last applied is dropped (newerLocked). A node not in nodes= counts for nothing: its key is
// queued for the leader to remove. A vote of this node of another run
// is withdrawn (queued as Removed) unless a vote of this run is on its
// way; one of this run, or a withdrawal, is its echo.
func (l *ledger) vote(contact, node, run string, s qualify.Status, rev uint64, now time.Time) (o outcome) {
	return l.voteMark(contact, node, mark{status: s, run: run}, rev, now)
}

// voteMark is vote with the vote's drain (markOf).
func (l *ledger) voteMark(contact, node string, m mark, rev uint64, now time.Time) (o outcome) {
	run, s := m.run, m.status
	if !l.ours(node) {
		return l.strayed(bucketVotes, voteKey(contact, node), node, s != qualify.Reachable && s != qualify.Unreachable)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if was, ok := l.tally.votes[contact][node]; ok && rev < was.rev {
		l.older++ // older than the vote it would replace (newerLocked)
		return o
	}
	m.rev = rev
	if node == l.self {
		o.Write = l.ownVote(contact, s, run, now)
	}
	if v, changed := l.tally.voteIn(contact, node, m); changed {
		o.Verdicts = append(o.Verdicts, v)
	}
	o.Write = l.decidedLocked(o.Verdicts) || o.Write
	return o
}

// strayed is stray's outcome.
func (l *ledger) strayed(bucket, key, node string, gone bool) outcome {
	o := outcome{Write: !gone}
	if l.stray(bucket, key, node, gone) {
		o.Foreign = node
	}
	return o
}

// ownVote handles this node's own vote read back; l.mu held.
func (l *ledger) ownVote(contact string, s qualify.Status, run string, now time.Time) (queued bool) {
	if vote := s == qualify.Reachable || s == qualify.Unreachable; run == l.run || !vote {
		if want, ok := l.echo[contact]; ok { // a withdrawal names no run
			l.echoAt = now
			if want == s {
				delete(l.echo, contact)
			}
		}
		return false
	}
	_, waiting := l.votesOut[contact]
	_, flying := l.echo[contact]
	if waiting || flying {
		return false
	}
	l.votesOut[contact] = qualify.Removed
	return true
}

// member records a node's membership entry, at KV revision rev: its
// announcement, or gone for its removal; an entry older than the key's
// last applied is dropped (newerLocked). It returns the live nodes when they or their runs
// changed. A node not in nodes= is no member: its key is queued for
// the leader to remove (o).
func (l *ledger) member(name string, a announcement, gone bool, rev uint64, now time.Time) (live []string, changed bool, o outcome) {
	if !l.ours(name) {
		return nil, false, l.strayed(bucketMembers, name, name, gone)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.newerLocked(l.memberRevs, name, rev) {
		return nil, false, o
	}
	was := l.members[name]
	m := Member{Name: name}
	if gone {
		m.Since = now
	} else {
		m.Up, m.Since, m.Probes, m.Digest, m.run = true, a.Since, a.Probes, a.Digest, a.Run
	}
	l.members[name] = m
	if was.Up == m.Up && was.run == m.run {
		return nil, false, o
	}
	return l.liveLocked(), true, o
}

// prune marks down every member up that a watch's first pass did not
// see, and returns the live nodes when they changed.
func (l *ledger) prune(seen map[string]bool, now time.Time) ([]string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for name, m := range l.members {
		if m.Up && !seen[name] {
			l.members[name] = Member{Name: name, Since: now}
			changed = true
		}
	}
	return l.liveLocked(), changed
}

// liveLocked lists the members up, sorted; l.mu held.
func (l *ledger) liveLocked() []string {
	var live []string
	for name, m := range l.members {
		if m.Up {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	return live
}

// decideMembers decides the verdicts again for the live nodes and their
// runs, and returns the changes (recorded while leading). This node's
// run is its own, whatever its entry says: a watch served by a replica
// still catching up (its own server, restarted on its old store) can
// deliver its announcement of the previous run, under which its votes of
// that run would count again.
func (l *ledger) decideMembers(live []string) outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	runs := map[string]string{}
	for _, n := range live {
		runs[n] = l.members[n].run
	}
	if _, ok := runs[l.self]; ok {
		runs[l.self] = l.run
	}
	vs := append(l.tally.incarnate(runs), l.tally.members(live)...)
	return outcome{Verdicts: vs, Write: l.decidedLocked(vs)}
}

// record keeps an entry of the verdicts bucket; until the seed ends
// (seed) it also seeds the tally, a later record of a contact replacing
// the seed of an earlier one (a watch of a replica still catching up
// delivers the records it holds, then the newer ones). It reports
// whether the record is an orphan: written after the contact's last
// vote went. rev is the entry's KV revision: an entry older than the
// key's last applied is dropped (newerLocked).
func (l *ledger) record(contact string, s qualify.Status, rev uint64) (orphan bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.newerLocked(l.recordRevs, contact, rev) {
		return false
	}
	if prev, ok := l.recorded[contact]; ok && !l.seeded && l.tally.status[contact] == prev {
		delete(l.tally.status, contact) // seeded from prev, decided by nothing since
	}
	l.recorded[contact] = s
	if !l.seeded {
		l.tally.seed(contact, s)
	}
	return l.seeded && len(l.tally.votes[contact]) == 0
}

// seed ends the seeding: the verdicts watch has delivered the bucket's
// records up to the last its stream's leader held.
func (l *ledger) seed() {
	l.mu.Lock()
	l.seeded = true
	l.mu.Unlock()
}

// forget drops the cluster's status of contact once neither a vote nor
// a record holds it (gone: the record was removed, by its entry at KV
// revision rev, dropped if older than the key's last applied), and
// returns the change; nothing is recorded for it.
func (l *ledger) forget(contact string, gone bool, rev uint64) (Verdict, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gone {
		if !l.newerLocked(l.recordRevs, contact, rev) {
			return Verdict{}, false
		}
		delete(l.recorded, contact)
	}
	if _, held := l.recorded[contact]; held {
		return Verdict{}, false
	}
	return l.tally.forget(contact)
}

// lead records a leading edge. Taking the lease adopts the recorded
// verdict of every contact whose votes decide nothing on their own (a
// new leader keeps what the routers were told), queues every status the
// verdicts bucket does not hold, and returns the contacts no vote holds
// (orphans) with the verdicts adopted.
func (l *ledger) lead(held bool) (vs []Verdict, orphans []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	edge := held && !l.leading
	l.leading = held
	if !edge {
		return nil, nil
	}
	for contact, s := range l.recorded {
		if v, ok := l.tally.adopt(contact, s); ok {
			vs = append(vs, v)
		}
	}
	for contact, s := range l.tally.status {
		if l.recorded[contact] != s {
			l.recordsOut[contact] = s
		}
	}
	return vs, l.orphansLocked()
}

// decidedLocked queues, while this node leads, the verdicts for the
// verdicts bucket; it reports whether it queued any. l.mu held.
func (l *ledger) decidedLocked(vs []Verdict) bool {
	if !l.leading || len(vs) == 0 {
		return false
	}
	queued := false
	for _, v := range vs {
		if v.Status != v.From { // a drain alone is not recorded: the votes carry it
			l.recordsOut[v.Contact] = v.Status
			queued = true
		}
	}
	return queued
}

// orphansLocked lists, once each, the contacts with a status or a record
// that no vote holds; l.mu held.
func (l *ledger) orphansLocked() []string {
	var out []string
	for contact := range l.tally.status {
		if len(l.tally.votes[contact]) == 0 {
			out = append(out, contact)
		}
	}
	for contact := range l.recorded {
		if _, listed := l.tally.status[contact]; !listed && len(l.tally.votes[contact]) == 0 {
			out = append(out, contact)
		}
	}
	return out
}

// unheld keeps of contacts those that no vote holds and that have a
// status or a record.
func (l *ledger) unheld(contacts []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(contacts), func(contact string) bool { return !l.unheldLocked(contact) })
}

// unheldLocked reports whether no vote holds contact and it has a
// status or a record; l.mu held.
func (l *ledger) unheldLocked(contact string) bool {
	_, recorded := l.recorded[contact]
	_, decided := l.tally.status[contact]
	return len(l.tally.votes[contact]) == 0 && (recorded || decided)
}

// drop queues, while this node leads, the removal of the verdict of each
// of contacts that is still unheld; it reports whether it queued any.
func (l *ledger) drop(contacts []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	queued := false
	for _, contact := range contacts {
		if l.leading && l.unheldLocked(contact) {
			l.recordsOut[contact] = qualify.Removed
			queued = true
		}
	}
	return queued
}

// ownVotes lists the contacts this node holds a vote of in the bucket.
func (l *ledger) ownVotes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var own []string
	for contact, votes := range l.tally.votes {
		if _, ok := votes[l.self]; ok {
			own = append(own, contact)
		}
	}
	return own
}

// batch is what the publisher writes at once.
type batch struct {
	votes, records map[string]qualify.Status
	strays         map[string]map[string]qualify.Status
	drains         map[string]bool // of votes, those that say draining
}

// take hands the publisher the writes queued: this node's votes and,
// when leading (the lease's own check, at the time of the take), the
// verdicts and the foreign keys' removals; the rest is dropped for a
// node that does not lead (a new leader queues what the bucket lacks).
func (l *ledger) take(leading bool) batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := batch{votes: l.votesOut, records: l.recordsOut, drains: map[string]bool{}}
	for contact := range b.votes {
		if l.drains[contact] {
			b.drains[contact] = true
		}
	}
	l.votesOut, l.recordsOut = map[string]qualify.Status{}, map[string]qualify.Status{}
	if !leading {
		b.records = nil
	} else {
		b.strays, l.strays = l.strays, map[string]map[string]qualify.Status{}
	}
	l.sending = len(b.votes) + len(b.records)
	return b
}

// requeue puts refused writes back, unless a newer one came meanwhile,
// and ends the publisher's writes.
func (l *ledger) requeue(b batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sending = 0
	for contact, s := range b.votes {
		if _, newer := l.votesOut[contact]; !newer {
			l.votesOut[contact] = s
		}
	}
	for contact, s := range b.records {
		if _, newer := l.recordsOut[contact]; !newer {
			l.recordsOut[contact] = s
		}
	}
	for bucket, keys := range b.strays {
		for k, s := range keys {
			if l.strays[bucket] == nil {
				l.strays[bucket] = map[string]qualify.Status{}
			}
			l.strays[bucket][k] = s
		}
	}
}

// stalled is how many of this node's votes have not come back, and for
// how long none has, at now.
func (l *ledger) stalled(now time.Time) (int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.echo), now.Sub(l.echoAt)
}

// pending counts the writes NATS has not taken: queued or being made.
func (l *ledger) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.votesOut) + len(l.recordsOut) + l.sending
}

// view fills v's members (every node of nodes, in order) and foreign
// nodes.
func (l *ledger) view(v *View, nodes []Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range nodes {
		m := l.members[n.Name]
		m.Name = n.Name
		v.Members = append(v.Members, m)
	}
	v.Foreign = slices.Sorted(maps.Keys(l.foreign))
}

// status is the cluster's status of contact.
func (l *ledger) status(contact string) qualify.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tally.status[contact]
}

// draining reports whether the cluster holds contact out of routing as
// draining.
func (l *ledger) draining(contact string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tally.draining[contact]
}

// verdicts counts the contacts with a verdict (Reachable or
// Unreachable), and of those the Unreachable.
func (l *ledger) verdicts() (total, unreachable int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.tally.status {
		switch s {
		case qualify.Unreachable:
			unreachable++
			total++
		case qualify.Reachable:
			total++
		}
	}
	return total, unreachable
}

// ballot is the votes of contact's live vantages.
func (l *ledger) ballot(contact string) []Vote {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tally.ballot(contact)
}

// foreignCount counts the foreign nodes seen.
func (l *ledger) foreignCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.foreign)
}
