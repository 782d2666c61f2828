package main

import (
	"slices"
	"time"
)

// phase is one stretch of the experiment with one impairment.
type phase struct {
	Name        string
	LossPercent int       // SIP packets dropped in each direction
	Dead        bool      // the peer is unreachable (every request dropped)
	Start, End  time.Time // as measured around the nft changes
	Counters    nftCounters
}

// lossStats is what one prober did while the peer was alive at one loss
// level: outages it reported that were not real, and how long they lasted.
type lossStats struct {
	FalseOutages int
	UnroutableS  float64
}

// proberStats is one prober's measured behaviour over the whole run.
type proberStats struct {
	ByLoss      map[int]*lossStats // by LossPercent of the phase
	Detected    bool               // went down during the dead spell
	AlreadyDown bool               // was (falsely) down when the dead spell began
	DetectionS  float64            // dead spell start to down
	Recovered   bool               // came up after the dead spell
	RecoveryS   float64            // dead spell end to up
}

// sendSlop is how much later than the tipping probe's timeout a prober
// may report a down: Kamailio's tm timers tick coarsely, and a log line
// takes its time. The tipping probe was sent within this much before
// down - T.
const sendSlop = 250 * time.Millisecond

// worstPhase returns the most impaired phase overlapping [from, to]
// (instants outside every phase belong to the first or last one).
func worstPhase(phases []phase, from, to time.Time) *phase {
	var w *phase
	for i := range phases {
		p := &phases[i]
		inside := p.Start.Before(to) && p.End.After(from) || i == 0 && !to.After(p.Start) ||
			i == len(phases)-1 && !from.Before(p.End)
		if inside && (w == nil || worse(impairmentOf(*w), impairmentOf(*p))) {
			w = p
		}
	}
	return w
}

// impairmentOf is the impairment of a phase.
func impairmentOf(p phase) impairment { return impairment{lossPercent: p.LossPercent, dead: p.Dead} }

// deadPhase returns the dead spell, or nil.
func deadPhase(phases []phase) *phase {
	for i := range phases {
		if phases[i].Dead {
			return &phases[i]
		}
	}
	return nil
}

// measureProber reads one prober's transitions against the phases. A
// down transition at t is caused by the probe sent at t - timeout (the
// failure that tipped it), give or take sendSlop, so it belongs to the
// most impaired phase in that window: a down caused by a probe lost in
// the last loss phase but noticed in the loss-free one after is blamed on
// the loss, and one right at the dead spell's start is its detection. A down that belongs to the
// dead spell is its detection; any other down is a false outage, whose
// unroutable time (clipped at the dead spell's start) is counted in the
// loss level of the phase it belongs to. The prober starts routable.
func measureProber(phases []phase, trs []transition, prober string, timeout time.Duration, end time.Time) proberStats {
	m := proberMeter{s: proberStats{ByLoss: map[int]*lossStats{}}, dead: deadPhase(phases), up: true}
	for _, p := range phases {
		if !p.Dead && m.s.ByLoss[p.LossPercent] == nil {
			m.s.ByLoss[p.LossPercent] = &lossStats{}
		}
	}
	for _, tr := range sortedOf(trs, prober) {
		m.cross(tr.At)
		if tr.Up == m.up {
			continue
		}
		if tr.Up {
			m.rise(tr.At)
		} else {
			sent := tr.At.Add(-timeout)
			m.fall(tr.At, worstPhase(phases, sent.Add(-sendSlop), sent))
		}
	}
	m.cross(end)
	if !m.up && m.open != nil {
		m.closeFalse(end)
	}
	return m.s
}

// sortedOf returns prober's transitions in time order.
func sortedOf(trs []transition, prober string) []transition {
	var out []transition
	for _, tr := range trs {
		if tr.Prober == prober {
			out = append(out, tr)
		}
	}
	slices.SortStableFunc(out, func(a, b transition) int { return a.At.Compare(b.At) })
	return out
}

// proberMeter is measureProber's walk over one prober's transitions.
type proberMeter struct {
	s       proberStats
	dead    *phase
	crossed bool       // the walk has passed the dead spell's start
	up      bool       // routable now
	downAt  time.Time  // start of the current outage
	open    *lossStats // the current outage is false and counts here; nil otherwise
}

// cross notes the dead spell's start once the walk reaches it: a false
// outage still open then is cut there, and its end counts as recovery.
func (m *proberMeter) cross(t time.Time) {
	if m.dead == nil || m.crossed || t.Before(m.dead.Start) {
		return
	}
	m.crossed = true
	if !m.up {
		m.s.AlreadyDown = true
		m.closeFalse(m.dead.Start)
	}
}

// fall records a down transition at t that belongs to phase p.
func (m *proberMeter) fall(t time.Time, p *phase) {
	m.up, m.downAt = false, t
	if p.Dead {
		if !m.s.Detected && !m.s.AlreadyDown {
			m.s.Detected, m.s.DetectionS = true, t.Sub(p.Start).Seconds()
		}
		return
	}
	m.open = m.s.ByLoss[p.LossPercent]
	m.open.FalseOutages++
}

// rise records an up transition at t.
func (m *proberMeter) rise(t time.Time) {
	m.up = true
	if m.open != nil {
		m.closeFalse(t)
		return
	}
	// The path came back somewhere during the nft command that ended the
	// dead spell, so an up reported up to sendSlop before its recorded end
	// is the recovery too, after no time at all.
	if m.dead != nil && !t.Before(m.dead.End.Add(-sendSlop)) && !m.s.Recovered {
		m.s.Recovered, m.s.RecoveryS = true, max(0, t.Sub(m.dead.End).Seconds())
	}
}

// closeFalse ends the current false outage at t, or at the dead spell's
// start if that comes first.
func (m *proberMeter) closeFalse(t time.Time) {
	if m.open == nil {
		return
	}
	if m.dead != nil && m.downAt.Before(m.dead.Start) && t.After(m.dead.Start) {
		t = m.dead.Start
	}
	m.open.UnroutableS += t.Sub(m.downAt).Seconds()
	m.open = nil
}
