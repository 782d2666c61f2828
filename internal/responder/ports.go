package responder

import (
	"net/netip"
	"sync"
)

// Ports is a Decide that drops the requests of chosen source ports: a
// peer that one prober's path loses (each prober's socket is its source
// port), the others still answered. Its zero value drops nothing; it is
// safe for concurrent use.
type Ports struct {
	mu   sync.Mutex
	drop map[uint16]bool
}

// Set drops (drop true) or answers again the requests from each port.
func (p *Ports) Set(drop bool, ports ...uint16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drop == nil {
		p.drop = map[uint16]bool{}
	}
	for _, port := range ports {
		p.drop[port] = drop
	}
}

// Decide drops the request when its source port is set.
func (p *Ports) Decide(src netip.AddrPort) Action {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Action{Drop: p.drop[src.Port()]}
}
