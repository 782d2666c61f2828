package engine

import (
	"context"
	"net/netip"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// DatagramProber is an AsyncProber that lets the engine time its UDP
// probes to IP addresses: the prober sends and matches them without
// keeping any state of its own, and the engine keeps what a probe in
// flight needs in the contact's own slot and schedule entry (its start,
// two flags). A probe in flight then costs no memory beyond what a
// contact waiting for its next probe already has (issue 7: with a million
// dead contacts, 50,000 probes are in flight, and the prober's
// transactions and timer events for them made dead contacts cost more
// memory than live ones). Probes that need more (DNS, TCP or TLS, a
// digest answer) still go through Start.
type DatagramProber interface {
	AsyncProber
	// Datagram reports whether a probe of t is a datagram probe, and
	// where it goes. It is pure and cheap: the engine calls it with its
	// lock held, at every start and answer.
	Datagram(t qualify.Target) (dest netip.AddrPort, ok bool)
	// Step sends the datagram probe key of t (the key's bit 31 is 0) as
	// of its event elapsed after the probe's start: the first
	// transmission at 0, else a retransmission of the same request. At or
	// past t.Timeout it sends nothing. It returns the wait until the
	// probe's next event, or the probe's result when it ended there
	// (timeout, send failure); the engine fills in Sent.
	Step(t qualify.Target, key uint64, elapsed time.Duration, proceeding bool) (wait time.Duration, res qualify.Result, done bool)
	// AnswerDatagrams makes f receive the responses to the datagram
	// probes, from the prober's receive goroutine; f reports what it made
	// of each, for the prober's counters.
	AnswerDatagrams(f func(key uint64, a qualify.Answer) qualify.Match)
}

// datagramKey returns the key of the datagram probe of slot id started
// at start (Unix nanoseconds): the slot in the low 31 bits, so that an
// answer finds its contact by index, and above them a salted hash of the
// start, so that the probes of one slot do not repeat a branch (RFC 3261
// section 8.1.1.7) and an answer to an earlier probe is late.
func (e *Engine) datagramKey(id uint32, start int64) uint64 {
	h := (uint64(start) ^ e.salt) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return h&^(1<<32-1) | uint64(id)
}

// datagramJob is the scheduler's job for slot id with a DatagramProber:
// it starts a probe, or steps the datagram probe in flight (a
// retransmission, the deadline), or moves an entry whose probe was
// answered meanwhile to the contact's next probe.
func (e *Engine) datagramJob(ctx context.Context, id uint32, due time.Time) {
	e.mu.Lock()
	c := &e.slots[id]
	kind := c.job(e.unix(due))
	switch {
	case kind == jobGone:
		e.mu.Unlock()
		e.sched.Finish(id, time.Time{})
		return
	case ctx.Err() != nil: // shutdown: as a cancelled probe, not applied
		e.endDatagram(c)
		e.dismiss(id, ctx.Err())
		e.mu.Unlock()
		e.sched.Finish(id, time.Time{})
		return
	case kind == jobStep:
		t, start, proceeding := e.target(c), c.next, c.proceeding
		e.mu.Unlock()
		elapsed := max(due.Sub(e.at(start)), 1) // 0 is the first transmission
		e.sched.Finish(id, e.step(id, t, start, due, elapsed, proceeding))
		return
	case kind == jobMoved:
		next := c.next
		e.mu.Unlock()
		e.sched.Finish(id, e.at(next))
		return
	}
	start := e.cfg.Now()
	c.running, c.next = true, e.unix(start)
	t := e.target(c)
	if _, ok := e.dgram.Datagram(t); !ok {
		e.mu.Unlock()
		e.late(start, due)
		e.async.Start(ctx, t, uint64(id), e.probeDone)
		return
	}
	c.datagram, c.proceeding = true, false
	c0 := c.next
	e.datagrams.Add(1)
	e.mu.Unlock()
	e.late(start, due)
	e.sched.Finish(id, e.step(id, t, c0, start, 0, false))
}

// jobKind is what a job of a DatagramProber's engine does with a slot.
type jobKind uint8

const (
	jobStart jobKind = iota // start a probe
	jobGone                 // nothing: the contact was removed
	jobStep                 // an event of the datagram probe in flight
	// jobMoved: nothing but move the entry to the contact's next probe.
	// The probe was answered after the loop took the entry at one of its
	// events, and before the job looked: the answer's Set then waits for
	// the job to finish.
	jobMoved
)

// job says what the job of c's entry, due at due (Unix nanoseconds),
// does. Called with mu held.
func (c *contact) job(due int64) jobKind {
	switch {
	case c.zombie:
		return jobGone
	case c.running && c.datagram:
		return jobStep
	case c.running:
		panic("engine: a job of a slot whose probe is in flight") // the scheduler runs one job per slot
	case c.next == 0 || due < c.next:
		return jobMoved
	}
	return jobStart
}

// late reports how late a probe due at due started.
func (e *Engine) late(start, due time.Time) {
	if e.cfg.Lateness != nil {
		e.cfg.Lateness(start.Sub(due))
	}
}

// target is what a probe of c needs. Called with mu held.
func (e *Engine) target(c *contact) qualify.Target {
	return qualify.Target{AoR: c.name, URI: c.uri, Timeout: c.policy.ProbeTimeout(), Options: c.opts}
}

// step sends or ends the datagram probe of slot id started at start, as
// of its event due at due, elapsed after the start, and returns when the
// slot's entry is due next: the probe's next event, or, when it ended
// here, the contact's next probe.
func (e *Engine) step(id uint32, t qualify.Target, start int64, due time.Time, elapsed time.Duration, proceeding bool) time.Time {
	key := e.datagramKey(id, start)
	wait, res, done := e.dgram.Step(t, key, elapsed, proceeding)
	if !done {
		return due.Add(wait)
	}
	e.mu.Lock()
	c := &e.slots[id]
	if c.zombie || !c.running || !c.datagram || e.datagramKey(id, c.next) != key {
		next := c.next // answered meanwhile, or removed (the scheduler ignores next)
		e.mu.Unlock()
		return e.at(next)
	}
	res.Sent = e.at(start)
	next, name, st := e.applyDatagram(id, res)
	e.mu.Unlock()
	e.observe(name, res, st)
	return next
}

// applyDatagram ends the datagram probe of slot id with res and applies
// it, as apply does. Called with mu held.
func (e *Engine) applyDatagram(id uint32, res qualify.Result) (time.Time, string, qualify.Step) {
	e.endDatagram(&e.slots[id])
	return e.apply(id, e.cfg.Now(), res)
}

// endDatagram marks the datagram probe of c ended. Called with mu held.
func (e *Engine) endDatagram(c *contact) {
	if c.datagram {
		e.datagrams.Add(-1)
	}
	c.running, c.datagram, c.proceeding = false, false, false
}

// abandonDatagram drops the datagram probe of slot id, if one is in
// flight, at shutdown: its waiters get err. Called with mu held.
func (e *Engine) abandonDatagram(id uint32, err error) {
	c := &e.slots[id]
	if !c.datagram {
		return
	}
	e.endDatagram(c)
	e.dismiss(id, err)
}

// answer is the DatagramProber's callback for a response to key.
func (e *Engine) answer(key uint64, a qualify.Answer) qualify.Match {
	id := uint32(key)
	e.mu.Lock()
	if e.stopped || int(id) >= len(e.slots) {
		e.mu.Unlock()
		return qualify.MatchLate
	}
	c := &e.slots[id]
	if c.zombie || !c.datagram || e.datagramKey(id, c.next) != key {
		e.mu.Unlock()
		return qualify.MatchLate
	}
	dest, _ := e.dgram.Datagram(e.target(c))
	switch {
	case a.From != dest:
		e.mu.Unlock()
		return qualify.MatchWrongSource
	case a.Code < 200:
		// Provisional: the deadline stays, retransmissions slow down to
		// T2 (Proceeding, RFC 3261 section 17.1.2.2).
		c.proceeding = true
		e.mu.Unlock()
		return qualify.Matched
	}
	sent := e.at(c.next)
	res := qualify.Result{Sent: sent, RTT: max(a.At.Sub(sent), 0), Code: a.Code, Transport: "udp", Dest: dest}
	next, name, step := e.applyDatagram(id, res)
	if !next.IsZero() {
		e.sched.Set(id, next) // the entry waits for the probe's next event
	}
	e.mu.Unlock()
	e.observe(name, res, step)
	return qualify.Matched
}

// stop makes answers to datagram probes late once Run's context is
// done, as results of other probes are not applied after it.
func (e *Engine) stop() {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
}

// stopDatagrams ends the datagram probes in flight when Run returns:
// their waiters get err.
func (e *Engine) stopDatagrams(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	if e.datagrams.Load() == 0 {
		return
	}
	for id := range e.slots {
		e.abandonDatagram(uint32(id), err)
	}
}
