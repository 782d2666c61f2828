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
	w.mu.Lock()
	changed := w.recheck(w.byAoR[aor], avail)
	w.mu.Unlock()
	emitChanges(at, changed, emit)
}

// resync re-evaluates every endpoint and calls emit for each whose
// availability changed: the daemon's log missed some AoR availability
// events, and with them, perhaps, an endpoint's change.
func (w *endpointWatch) resync(at time.Time, avail func(string) bool, emit func(time.Time, string, bool)) {
	w.mu.Lock()
	eps := make([]string, 0, len(w.aorsOf))
	for ep := range w.aorsOf {
		eps = append(eps, ep)
	}
	changed := w.recheck(eps, avail)
	w.mu.Unlock()
	emitChanges(at, changed, emit)
}

// endpointChange is an endpoint's new availability.
type endpointChange struct {
	ep  string
	now bool
}

// recheck re-evaluates eps and returns those whose availability changed.
// Called with mu held.
func (w *endpointWatch) recheck(eps []string, avail func(string) bool) []endpointChange {
	var changed []endpointChange
	for _, ep := range eps {
		now := w.anyAvailable(ep, avail)
		if now != w.available[ep] {
			w.available[ep] = now
			changed = append(changed, endpointChange{ep, now})
		}
	}
	return changed
}

// emitChanges calls emit for each change, in endpoint name order.
func emitChanges(at time.Time, changed []endpointChange, emit func(time.Time, string, bool)) {
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
