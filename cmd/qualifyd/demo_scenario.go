package main

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// phase is one spell of the demo peer's scripted behaviour.
type phase struct {
	from, to time.Duration // offsets within the cycle
	name     string
	loss     float64 // share of requests dropped
	dead     bool    // the peer is really down (outages here are detections)
}

// demoCycle is the demo peer's repeating script: healthy, one lost probe, a
// lossy spell, a dead spell, recovery.
var demoCycle = []phase{
	{0, 10 * time.Second, "healthy", 0, false},
	{10 * time.Second, 11 * time.Second, "one probe lost", 1, false},
	{11 * time.Second, 20 * time.Second, "healthy", 0, false},
	{20 * time.Second, 38 * time.Second, "lossy: half of the requests dropped", 0.5, false},
	{38 * time.Second, 50 * time.Second, "dead: no answers", 1, true},
	{50 * time.Second, 60 * time.Second, "recovered", 0, false},
}

const demoCycleLength = 60 * time.Second

// phaseAt returns the phase the peer is in at offset d since the start.
func phaseAt(d time.Duration) phase {
	d %= demoCycleLength
	for _, p := range demoCycle {
		if d >= p.from && d < p.to {
			return p
		}
	}
	return demoCycle[0]
}

// demoPeer decides, per request, whether the scripted peer answers. Its
// random loss is seeded, so every run of the demo is the same.
type demoPeer struct {
	start time.Time
	mu    sync.Mutex
	rng   *rand.Rand
}

func newDemoPeer(start time.Time) *demoPeer {
	return &demoPeer{start: start, rng: rand.New(rand.NewPCG(2026, 11))}
}

func (p *demoPeer) decide(netip.AddrPort) responder.Action {
	ph := phaseAt(time.Since(p.start))
	p.mu.Lock()
	lost := p.rng.Float64() < ph.loss
	p.mu.Unlock()
	return responder.Action{Drop: lost}
}
