package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// ErrUnknownAoR is returned for an AoR name that is not configured.
var ErrUnknownAoR = errors.New("unknown AoR")

// ErrRemoved is the Err of a manual qualify whose contact a reload removed
// before its probe ended.
var ErrRemoved = errors.New("contact removed")

// ContactResult is the outcome of one contact's probe in a manual qualify.
type ContactResult struct {
	AoR, URI string
	// Result is what the probe measured; OK and Reason its verdict.
	Result qualify.Result
	OK     bool
	Reason qualify.Reason
	// Status is the contact's status after the probe.
	Status qualify.Status
	// Err is ErrRemoved when a reload removed the contact meanwhile,
	// ErrElsewhere when another node probes it (SetProbed).
	Err error
}

// Qualify probes every contact of the named AoR now and waits for the
// results, in the AoR's contact order. A contact whose probe is already in
// flight reports that probe instead of starting a second one. The results
// are applied like any other probe, and the schedule continues from them;
// with qualify off they change no status. A contact another node probes
// (SetProbed) is not probed: its result has Err ErrElsewhere.
func (e *Engine) Qualify(ctx context.Context, aor string) ([]ContactResult, error) {
	e.mu.Lock()
	a, ok := e.aors[aor]
	if !ok {
		e.mu.Unlock()
		return nil, fmt.Errorf("qualify %q: %w", aor, ErrUnknownAoR)
	}
	ids := a.ids
	uris := make([]string, len(ids))
	ch := make(chan ContactResult, len(ids))
	now := e.cfg.Now()
	for i, id := range ids {
		uris[i] = e.slots[id].uri
		if c := &e.slots[id]; c.elsewhere {
			ch <- ContactResult{AoR: aor, URI: c.uri, Status: c.state.Status, Err: ErrElsewhere}
			continue
		}
		e.waiters[id] = append(e.waiters[id], ch)
		if !e.slots[id].running {
			e.slots[id].wait(e.stamp(now))
			e.sched.Set(id, now)
		}
	}
	e.mu.Unlock()
	return collect(ctx, aor, uris, ch)
}

// collect waits for one result per contact and orders them as uris.
func collect(ctx context.Context, aor string, uris []string, ch <-chan ContactResult) ([]ContactResult, error) {
	byURI := make(map[string]ContactResult, len(uris))
	for range uris {
		select {
		case r := <-ch:
			byURI[r.URI] = r
		case <-ctx.Done():
			return nil, fmt.Errorf("qualify %q: %w", aor, ctx.Err())
		}
	}
	out := make([]ContactResult, 0, len(uris))
	for _, u := range uris {
		out = append(out, byURI[u])
	}
	return out, nil
}

// notify answers the waiters of slot id. The channels have room for every
// answer, so this never blocks. Called with mu held.
func (e *Engine) notify(id uint32, step qualify.Step, res qualify.Result) {
	ws, ok := e.waiters[id]
	if !ok {
		return
	}
	delete(e.waiters, id)
	c := &e.slots[id]
	r := ContactResult{AoR: c.aor.name, URI: c.uri, Result: res, OK: step.OK, Reason: step.Reason, Status: c.state.Status}
	for _, w := range ws {
		w <- r
	}
}

// dismissAll answers every waiter with err, when Run returns. Called
// without mu.
func (e *Engine) dismissAll(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id := range e.waiters {
		e.dismiss(id, err)
	}
}

// dismiss answers the waiters of slot id with err: the contact was removed
// (ErrRemoved) or its probe cut short. Called with mu held.
func (e *Engine) dismiss(id uint32, err error) {
	ws, ok := e.waiters[id]
	if !ok {
		return
	}
	delete(e.waiters, id)
	c := &e.slots[id]
	for _, w := range ws {
		w <- ContactResult{AoR: c.aor.name, URI: c.uri, Status: c.state.Status, Err: err}
	}
}
