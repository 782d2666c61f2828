package web

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// fakeHistory is a HistorySource of fixed histories, by AoR name.
type fakeHistory map[string]engine.History

func (f fakeHistory) History(name string) (engine.History, bool) {
	h, ok := f[name]
	return h, ok
}

// spell is a run of buckets [from, to) of a synthetic history.
type spell struct{ from, to int }

// shape describes a synthetic history: n buckets of width ending at end,
// probes each, an RTT around base, outages (unroutable, every probe
// failed) and lossy spells (half the probes failed, still routable).
type shape struct {
	aor, uri       string
	end            time.Time
	width          time.Duration
	n, probes      int
	base           time.Duration
	outages, lossy []spell
	seed           uint64
}

// synthHistory builds the history s describes, with a status change at
// each outage's start and end.
func synthHistory(s shape) engine.History {
	rng := rand.New(rand.NewPCG(s.seed, 7))
	h := engine.History{AoR: s.aor, Width: s.width, Buckets: make([]engine.Bucket, s.n)}
	start := s.end.Add(-time.Duration(s.n) * s.width)
	for i := range h.Buckets {
		b := &h.Buckets[i]
		b.Start = start.Add(time.Duration(i) * s.width)
		b.Probes, b.Routable = s.probes, s.width
		wave := 1 + 0.25*math.Sin(float64(i)/float64(s.n)*2*math.Pi)
		p50 := time.Duration(float64(s.base) * wave * (0.95 + 0.1*rng.Float64()))
		b.RTTMin, b.RTTP50, b.RTTMax = p50*8/10, p50, p50*(12+time.Duration(rng.IntN(10)))/10
		if in(s.lossy, i) {
			b.Failures = (s.probes + 1) / 2
		}
		if in(s.outages, i) {
			b.Failures, b.Routable = s.probes, 0
			b.RTTMin, b.RTTP50, b.RTTMax = 0, 0, 0
		}
	}
	for _, o := range s.outages {
		h.Changes = append(h.Changes,
			engine.Change{Time: h.Buckets[o.from].Start, URI: s.uri, From: qualify.Reachable, To: qualify.Unreachable, Reason: qualify.ReasonTimeout},
			engine.Change{Time: h.Buckets[o.to-1].Start.Add(s.width), URI: s.uri, From: qualify.Unreachable, To: qualify.Reachable})
	}
	return h
}

func in(spells []spell, i int) bool {
	for _, s := range spells {
		if i >= s.from && i < s.to {
			return true
		}
	}
	return false
}
