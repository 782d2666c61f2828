package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// transition is one prober's change of routability of the peer, with the
// prober's own timestamp of it.
type transition struct {
	Prober string
	At     time.Time
	Up     bool // routable after the change
}

// parseQualifyd reads one line of `qualifyd run --log-format json`. A
// contact status event gives a transition of the prober its AoR stands
// for; anything else gives ok = false.
func parseQualifyd(line []byte, proberOf map[string]string) (tr transition, reachable, ok bool) {
	var ev struct {
		Time     time.Time `json:"time"`
		Event    string    `json:"event"`
		AoR      string    `json:"aor"`
		To       string    `json:"to"`
		Routable bool      `json:"routable"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Event != "status" || proberOf[ev.AoR] == "" {
		return transition{}, false, false
	}
	return transition{Prober: proberOf[ev.AoR], At: ev.Time, Up: ev.Routable}, ev.To == "Reachable", true
}

// dsEvent matches the DSEVENT lines of lab/prober.cfg's event routes.
var dsEvent = regexp.MustCompile(`DSEVENT t=(\d+)\.(\d{6}) dst-(down|up) `)

// parseKamailio reads one line of Kamailio's log: a DSEVENT line gives a
// transition of prober name.
func parseKamailio(line []byte, name string) (transition, bool) {
	m := dsEvent.FindSubmatch(line)
	if m == nil {
		return transition{}, false
	}
	sec, err1 := strconv.ParseInt(string(m[1]), 10, 64)
	usec, err2 := strconv.ParseInt(string(m[2]), 10, 64)
	if err1 != nil || err2 != nil {
		return transition{}, false
	}
	return transition{Prober: name, At: time.Unix(sec, usec*1000), Up: string(m[3]) == "up"}, true
}

// tracker collects the transitions of every prober as their logs stream
// in, and lets the experiment wait for a state. Safe for concurrent use.
type tracker struct {
	mu        sync.Mutex
	all       []transition
	up        map[string]bool // routable now; a prober starts routable
	reachable map[string]bool // qualifyd AoRs seen Reachable at least once
	changed   chan struct{}   // closed and replaced at every change
}

// newTracker returns an empty tracker.
func newTracker() *tracker {
	return &tracker{up: map[string]bool{}, reachable: map[string]bool{}, changed: make(chan struct{})}
}

// add records one transition; reached marks a qualifyd AoR Reachable.
func (t *tracker) add(tr transition, reached bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.all = append(t.all, tr)
	t.up[tr.Prober] = tr.Up
	if reached {
		t.reachable[tr.Prober] = true
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// transitions returns a copy of everything recorded so far.
func (t *tracker) transitions() []transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]transition(nil), t.all...)
}

// upLocked reports whether prober is routable now (true before any
// event); the caller holds t.mu.
func (t *tracker) upLocked(prober string) bool {
	up, seen := t.up[prober]
	return up || !seen
}

// wait blocks until cond holds (called under the lock), ctx ends, or
// limit passes; the error says which of the latter two happened.
func (t *tracker) wait(ctx context.Context, limit time.Duration, what string, cond func(t *tracker) bool) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		t.mu.Lock()
		ok, ch := cond(t), t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-timer.C:
			return fmt.Errorf("waiting for %s: not within %v", what, limit)
		}
	}
}
