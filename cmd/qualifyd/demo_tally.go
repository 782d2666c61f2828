package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// demoTally counts, per AoR, the outages the demo caused: false ones (the
// peer was up) with the time spent wrongly unroutable, and detections of
// the dead spell with their delay.
type demoTally struct {
	aors map[string]*aorTally
}

type aorTally struct {
	falseOutages int
	falseTime    time.Duration
	detections   []time.Duration
	downSince    time.Duration
	down, falsy  bool
}

func newDemoTally() *demoTally { return &demoTally{aors: map[string]*aorTally{}} }

func (t *demoTally) get(aor string) *aorTally {
	a, ok := t.aors[aor]
	if !ok {
		a = &aorTally{}
		t.aors[aor] = a
	}
	return a
}

// observe accounts one event at offset at since the start.
func (t *demoTally) observe(ev engine.Event, at time.Duration) {
	if ev.Kind != engine.StatusChanged {
		return
	}
	a := t.get(ev.AoR)
	switch {
	case ev.To == qualify.Unreachable && !a.down:
		a.down, a.downSince = true, at
		ph := phaseAt(at)
		a.falsy = !ph.dead
		if a.falsy {
			a.falseOutages++
		} else {
			a.detections = append(a.detections, at%demoCycleLength-ph.from)
		}
	case ev.To == qualify.Reachable && a.down:
		a.down = false
		if a.falsy {
			a.falseTime += at - a.downSince
		}
	}
}

// finish closes the outages still open at offset at.
func (t *demoTally) finish(at time.Duration) {
	for _, a := range t.aors {
		if a.down && a.falsy {
			a.falseTime += at - a.downSince
			a.down = false
		}
	}
}

func (t *demoTally) print(w io.Writer) {
	names := make([]string, 0, len(t.aors))
	for n := range t.aors {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nsummary (false outage: Unreachable while the peer was up; detection: delay from the start of the dead spell)")
	for _, n := range names {
		a := t.aors[n]
		det := make([]string, len(a.detections))
		for i, d := range a.detections {
			det[i] = asterisk.Seconds(d.Round(10 * time.Millisecond))
		}
		fmt.Fprintf(w, "  %-9s false outages %d (%.1fs unroutable), dead peer detected after %v\n", n, a.falseOutages, a.falseTime.Seconds(), det)
	}
}
