package sipprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Bounds of the DNS cache TTLs (RFC 2308 negative caching included).
const (
	minTTL      = 1 * time.Second
	maxTTL      = 1 * time.Hour
	negativeTTL = 30 * time.Second
	maxCache    = 1 << 16
	// maxTargets bounds the targets probed for one contact, whatever the
	// DNS answers hold.
	maxTargets = 16
	// ednsSize is the UDP payload size advertised (RFC 6891; 1232 avoids
	// IP fragmentation, as DNS Flag Day 2020 recommends).
	ednsSize = 1232
)

// errNoRecords is returned when a name has no usable records.
var errNoRecords = errors.New("no SRV, A or AAAA records")

// resolver does RFC 3263 lookups (SRV, then A/AAAA) against one DNS server
// with a cache by TTL. Safe for concurrent use.
type resolver struct {
	server string
	client dns.Client
	mu     sync.Mutex
	cache  map[cacheKey]cacheEntry
}

type cacheKey struct {
	name  string
	qtype uint16
}

type cacheEntry struct {
	rrs     []dns.RR
	expires time.Time
}

// newResolver uses server, or the first nameserver of /etc/resolv.conf.
// Without either, every lookup fails (reason dns).
func newResolver(server string) *resolver {
	if server == "" {
		if cc, err := dns.ClientConfigFromFile("/etc/resolv.conf"); err == nil && len(cc.Servers) > 0 {
			server = net.JoinHostPort(cc.Servers[0], cc.Port)
		}
	}
	return &resolver{server: server, cache: make(map[cacheKey]cacheEntry)}
}

// srvService is the SRV service label of a transport (RFC 3263 4.2).
func srvService(t transport) string {
	return [...]string{"_sip._udp.", "_sip._tcp.", "_sips._tcp."}[t]
}

// resolve returns every target address of host: with an explicit port only
// its A/AAAA records, else its SRV targets in priority order (each with its
// A/AAAA records), else its A/AAAA records on the default port.
func (r *resolver) resolve(ctx context.Context, host string, port uint16, t transport) ([]netip.AddrPort, error) {
	name := dns.Fqdn(host)
	if port != 0 {
		return r.addrs(ctx, name, port)
	}
	srvs, err := r.lookup(ctx, srvService(t)+name, dns.TypeSRV)
	if err != nil {
		return nil, err
	}
	if len(srvs) == 0 {
		return r.addrs(ctx, name, t.defaultPort())
	}
	var out []netip.AddrPort
	for _, rr := range sortSRV(srvs) {
		addrs, err := r.addrs(ctx, rr.Target, rr.Port)
		if err != nil && !errors.Is(err, errNoRecords) {
			return nil, err
		}
		out = append(out, addrs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", host, errNoRecords)
	}
	return out[:min(len(out), maxTargets)], nil
}

// sortSRV orders SRV records by priority, then by descending weight
// (deterministic instead of RFC 2782's weighted random draw: every target
// is probed anyway).
func sortSRV(rrs []dns.RR) []*dns.SRV {
	var srvs []*dns.SRV
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok && s.Target != "." {
			srvs = append(srvs, s)
		}
	}
	slices.SortStableFunc(srvs, func(a, b *dns.SRV) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		return int(b.Weight) - int(a.Weight)
	})
	return srvs
}

// addrs returns the A then AAAA addresses of name with port.
func (r *resolver) addrs(ctx context.Context, name string, port uint16) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		rrs, err := r.lookup(ctx, name, qtype)
		if err != nil {
			return nil, err
		}
		for _, rr := range rrs {
			if a, ok := addrOf(rr); ok {
				out = append(out, netip.AddrPortFrom(a, port))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", name, errNoRecords)
	}
	return out[:min(len(out), maxTargets)], nil
}

func addrOf(rr dns.RR) (netip.Addr, bool) {
	switch v := rr.(type) {
	case *dns.A:
		a, ok := netip.AddrFromSlice(v.A.To4())
		return a, ok
	case *dns.AAAA:
		a, ok := netip.AddrFromSlice(v.AAAA)
		return a, ok
	}
	return netip.Addr{}, false
}

// lookup returns the records of (name, qtype), from the cache while their
// TTL lasts. A name without such records returns no records and no error.
func (r *resolver) lookup(ctx context.Context, name string, qtype uint16) ([]dns.RR, error) {
	key := cacheKey{name, qtype}
	now := time.Now()
	r.mu.Lock()
	e, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.rrs, nil
	}
	rrs, ttl, err := r.query(ctx, name, qtype)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.cache) >= maxCache {
		clear(r.cache)
	}
	r.cache[key] = cacheEntry{rrs: rrs, expires: now.Add(ttl)}
	r.mu.Unlock()
	return rrs, nil
}

// query asks the server, over TCP when the UDP answer is truncated, and
// returns the answers of qtype with the TTL to cache them for.
func (r *resolver) query(ctx context.Context, name string, qtype uint16) ([]dns.RR, time.Duration, error) {
	if r.server == "" {
		return nil, 0, errors.New("no DNS server configured")
	}
	q := new(dns.Msg).SetQuestion(name, qtype)
	q.SetEdns0(ednsSize, false) // room for many SRV/A records over UDP
	resp, _, err := r.client.ExchangeContext(ctx, q, r.server)
	if err == nil && resp.Truncated {
		tcp := dns.Client{Net: "tcp"}
		resp, _, err = tcp.ExchangeContext(ctx, q, r.server)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dns %s %s: %w", dns.TypeToString[qtype], name, err)
	}
	if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
		return nil, 0, fmt.Errorf("dns %s %s: %s", dns.TypeToString[qtype], name, dns.RcodeToString[resp.Rcode])
	}
	return answers(resp, qtype)
}

// answers picks the records of qtype and their smallest TTL; an empty
// answer is cached per the SOA minimum (RFC 2308), capped.
func answers(resp *dns.Msg, qtype uint16) ([]dns.RR, time.Duration, error) {
	var rrs []dns.RR
	ttl := maxTTL
	for _, rr := range resp.Answer {
		if rr.Header().Rrtype == qtype {
			rrs = append(rrs, rr)
			ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
		}
	}
	if len(rrs) == 0 {
		ttl = negativeTTL
		for _, rr := range resp.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				ttl = min(negativeTTL, time.Duration(min(soa.Minttl, soa.Hdr.Ttl))*time.Second)
			}
		}
	}
	return rrs, max(ttl, minTTL), nil
}
