package responder

import (
	"errors"
	"net/netip"
)

// Group is several responders on consecutive sockets of one host, so that
// a benchmark spreads its contacts over many ports (and many receive
// queues) instead of funnelling them into one.
type Group struct {
	rs []*Responder
}

// ListenGroup opens n sockets on host ("127.0.0.1"), each on an ephemeral
// port, all answering with decide (nil: always 200 OK). On error nothing
// stays open.
func ListenGroup(host string, n int, decide Decide) (*Group, error) {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, err
	}
	g := &Group{}
	for range n {
		r, err := Listen(netip.AddrPortFrom(ip, 0).String(), decide)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.rs = append(g.rs, r)
	}
	return g, nil
}

// Addrs returns the local address of every socket, in opening order.
func (g *Group) Addrs() []netip.AddrPort {
	out := make([]netip.AddrPort, len(g.rs))
	for i, r := range g.rs {
		out[i] = r.Addr()
	}
	return out
}

// Counts returns the sums of every socket's counts (see Responder.Counts).
func (g *Group) Counts() (answered, dropped, ignored uint64) {
	for _, r := range g.rs {
		a, d, i := r.Counts()
		answered, dropped, ignored = answered+a, dropped+d, ignored+i
	}
	return answered, dropped, ignored
}

// Close closes every socket and waits for them; idempotent.
func (g *Group) Close() error {
	var errs []error
	for _, r := range g.rs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
