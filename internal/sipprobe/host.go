package sipprobe

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// probeHost resolves rt.host (RFC 3263) and probes every target; it runs
// in a goroutine of its own, for the lookup.
func (p *Prober) probeHost(ctx context.Context, pr spec, rt *route, tag uint64, done func(uint64, qualify.Result)) {
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, p.cfg.DNSTimeout)
	addrs, err := p.dns.resolve(dctx, rt.host, rt.port, rt.transport)
	cancel()
	took := time.Since(start)
	if err != nil {
		done(tag, qualify.Result{Reason: qualify.ReasonDNS, Detail: err.Error(), DNS: took})
		return
	}
	h := &hostProbe{results: make([]qualify.Result, len(addrs)), dns: took, tag: tag, done: done}
	h.left.Store(int32(len(addrs)))
	for i, a := range addrs {
		p.startRoute(ctx, pr, rt, a, uint64(i), h.targetDone)
	}
}

// hostProbe is the probe of a host name: one transaction per target
// (tagged by its index), complete when all of them are.
type hostProbe struct {
	results []qualify.Result
	left    atomic.Int32
	dns     time.Duration
	tag     uint64
	done    func(uint64, qualify.Result)
}

// targetDone records the result of target i; the last one delivers the
// best of them.
func (h *hostProbe) targetDone(i uint64, r qualify.Result) {
	h.results[i] = r
	if h.left.Add(-1) > 0 {
		return
	}
	best := h.results[bestResult(h.results)]
	if len(h.results) > 1 {
		best.Targets = h.results
	}
	best.DNS = h.dns
	h.done(h.tag, best)
}

// bestResult picks the first 2xx, else the first final response, else
// the first result.
func bestResult(rs []qualify.Result) int {
	final := -1
	for i, r := range rs {
		if r.Reason == qualify.ReasonNone && r.Code >= 200 && r.Code < 300 {
			return i
		}
		if final < 0 && r.Reason == qualify.ReasonNone && r.Code >= 200 {
			final = i
		}
	}
	return max(final, 0)
}
