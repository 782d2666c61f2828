package main

import (
	"sort"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// endpointWatch derives endpoint availability from AoR availability: an
// endpoint is Reachable when any of its AoRs is available, as Asterisk's
// endpoint state. It reports only changes. Safe for concurrent use.
type endpointWatch struct {
	mu        sync.Mutex
	byAoR     map[string][]string // AoR -> endpoints listing it
	aorsOf    map[string][]string // endpoint -> its AoRs
	available map[string]bool     // endpoint -> last known availability
}

func newEndpointWatch() *endpointWatch {
	return &endpointWatch{available: map[string]bool{}}
}

// configure replaces the endpoint list; availability of endpoints that
// remain is kept, new ones start from avail (the AoR availability now).
func (w *endpointWatch) configure(eps []pjsip.Endpoint, avail func(aor string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byAoR, w.aorsOf = map[string][]string{}, map[string][]string{}
	prev := w.available
	w.available = map[string]bool{}
	for _, ep := range eps {
		w.aorsOf[ep.Name] = ep.AoRs
		for _, a := range ep.AoRs {
			w.byAoR[a] = append(w.byAoR[a], ep.Name)
		}
		if v, ok := prev[ep.Name]; ok {
			w.available[ep.Name] = v
		} else {
			w.available[ep.Name] = w.anyAvailable(ep.Name, avail)
		}
	}
}

// aorChanged re-evaluates the endpoints listing aor and calls emit for each
// whose availability changed.
func (w *endpointWatch) aorChanged(aor string, at time.Time, avail func(string) bool, emit func(time.Time, string, bool)) {
	type change struct {
		ep  string
		now bool
	}
	var changed []change
	w.mu.Lock()
	for _, ep := range w.byAoR[aor] {
		now := w.anyAvailable(ep, avail)
		if now != w.available[ep] {
			w.available[ep] = now
			changed = append(changed, change{ep, now})
		}
	}
	w.mu.Unlock()
	sort.Slice(changed, func(i, j int) bool { return changed[i].ep < changed[j].ep })
	for _, c := range changed {
		emit(at, c.ep, c.now)
	}
}

// anyAvailable is true when one of ep's AoRs is available. Called with mu
// held.
func (w *endpointWatch) anyAvailable(ep string, avail func(string) bool) bool {
	for _, a := range w.aorsOf[ep] {
		if avail(a) {
			return true
		}
	}
	return false
}
