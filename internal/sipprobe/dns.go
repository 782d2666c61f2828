package sipprobe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
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

// resolver resolves host names as the system's resolver does with
// "hosts: files dns" (docs/qualify-semantics.md §3.6): the hosts file,
// then every nameserver of resolv.conf with its options, and SRV records
// (RFC 3263) from DNS. DNS answers are cached by TTL; the files are read
// again when they change. Safe for concurrent use.
type resolver struct {
	conf  *sysFile[resolvConf]
	hosts *sysFile[hostsFile]
	order *sysFile[[]source]
	// server, when set, replaces resolv.conf's nameservers.
	server   string
	exchange exchangeFunc
	next     atomic.Uint32 // queries sent, for rotate
	mu       sync.Mutex
	cache    map[cacheKey]cacheEntry
}

type cacheKey struct {
	name  string
	qtype uint16
}

type cacheEntry struct {
	rrs     []dns.RR
	expires time.Time
}

// systemFiles are the files a resolver reads.
type systemFiles struct {
	resolvConf, hosts, nsswitch string
}

// newResolver reads files; server, when set, is the only nameserver.
func newResolver(server string, files systemFiles) *resolver {
	hostname, _ := os.Hostname()
	return &resolver{
		conf:     newSysFile(files.resolvConf, func(b []byte) resolvConf { return parseResolvConf(b, hostname) }),
		hosts:    newSysFile(files.hosts, parseHosts),
		order:    newSysFile(files.nsswitch, parseNSSwitch),
		server:   server,
		exchange: dnsExchange,
		cache:    make(map[cacheKey]cacheEntry),
	}
}

// view is what the system files said when a resolution began.
type view struct {
	conf  resolvConf
	hosts hostsFile
	order []source
}

func (r *resolver) view(now time.Time) *view {
	v := &view{conf: r.conf.get(now), hosts: r.hosts.get(now), order: r.order.get(now)}
	if r.server != "" {
		v.conf.servers = []string{r.server}
	}
	return v
}

// fromFiles reports whether the hosts file answers host before DNS is
// asked.
func (v *view) fromFiles(host string) bool {
	return v.order[0] == filesSource && len(v.hosts.lookup(host)) > 0
}

// srvService is the SRV service label of a transport (RFC 3263 4.2).
func srvService(t transport) string {
	return [...]string{"_sip._udp.", "_sip._tcp.", "_sips._tcp."}[t]
}

// resolve returns every target address of host. A localhost name gets
// the hosts file's addresses, else the loopback ones. A name the hosts
// file answers first gets its addresses. Otherwise, without a port, its
// SRV targets in priority order (each with its addresses); with a port,
// or without SRV records, its addresses on the port (or the transport's
// default). NAPTR is not asked: the URI's transport, or the endpoint's,
// is the one probed.
func (r *resolver) resolve(ctx context.Context, host string, port uint16, t transport) ([]netip.AddrPort, error) {
	v := r.view(time.Now())
	if isLocalhost(host) {
		as := v.hosts.lookup(host)
		if len(as) == 0 {
			as = loopback
		}
		return withPort(as, cmp.Or(port, t.defaultPort())), nil
	}
	if port == 0 && !v.fromFiles(host) {
		out, err := r.srv(ctx, v, host, t)
		if err != nil && len(v.hosts.lookup(host)) == 0 {
			return nil, fmt.Errorf("%s: %w", host, err)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	out, err := r.addrs(ctx, v, host, v.conf.names(host), cmp.Or(port, t.defaultPort()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", host, err)
	}
	return out, nil
}

// srv returns the targets of the first of host's search names with SRV
// records, none when none has them, or the first error when a lookup
// failed (then nothing says the name has no SRV records).
func (r *resolver) srv(ctx context.Context, v *view, host string, t transport) ([]netip.AddrPort, error) {
	var first error
	for _, name := range v.conf.names(host) {
		rrs, err := r.lookup(ctx, v, srvService(t)+name, dns.TypeSRV)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		if srvs := sortSRV(rrs); len(srvs) > 0 {
			return r.srvTargets(ctx, v, srvs)
		}
	}
	return nil, first
}

// srvTargets resolves the first maxTargets SRV targets in order (an
// answer over TCP may hold thousands, each a lookup of its own), until
// maxTargets addresses are in hand; a target that does not resolve is
// left out, and the first failure is returned when none does.
func (r *resolver) srvTargets(ctx context.Context, v *view, srvs []*dns.SRV) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	var first error
	for _, s := range srvs[:min(len(srvs), maxTargets)] {
		if len(out) >= maxTargets {
			break
		}
		as, err := r.addrs(ctx, v, s.Target, []string{s.Target}, s.Port)
		first = cmp.Or(first, err)
		out = append(out, as...)
	}
	if len(out) == 0 {
		return nil, first
	}
	return out[:min(len(out), maxTargets)], nil
}

// addrs returns the addresses of host with port from the sources in
// nsswitch order: the hosts file's for host, or DNS's for the first of
// names with A or AAAA records. A DNS failure moves on to the next name
// and source, as glibc does, and is returned when nothing answers.
func (r *resolver) addrs(ctx context.Context, v *view, host string, names []string, port uint16) ([]netip.AddrPort, error) {
	var first error
	for _, src := range v.order {
		if src == filesSource {
			if as := v.hosts.lookup(host); len(as) > 0 {
				return withPort(as, port), nil
			}
			continue
		}
		for _, name := range names {
			as, err := r.dnsAddrs(ctx, v, name)
			if len(as) > 0 {
				return withPort(as, port), nil
			}
			first = cmp.Or(first, err)
		}
	}
	if first == nil {
		return nil, errNoRecords
	}
	return nil, first
}

// dnsAddrs returns the A then AAAA addresses of the absolute name, both
// asked at once as glibc's getaddrinfo does (a dead first nameserver
// costs its wait once, not twice). Addresses of one type are returned
// even when the other's lookup failed.
func (r *resolver) dnsAddrs(ctx context.Context, v *view, name string) ([]netip.Addr, error) {
	aaaa, ok := r.cached(cacheKey{name, dns.TypeAAAA}, time.Now())
	var aaaaErr error
	done := make(chan struct{})
	if ok {
		close(done)
	} else {
		go func() {
			defer close(done)
			aaaa, aaaaErr = r.lookup(ctx, v, name, dns.TypeAAAA)
		}()
	}
	a, err := r.lookup(ctx, v, name, dns.TypeA)
	<-done
	var out []netip.Addr
	for _, rr := range slices.Concat(a, aaaa) {
		if addr, ok := addrOf(rr); ok {
			out = append(out, addr)
		}
	}
	return out, cmp.Or(err, aaaaErr)
}

// withPort pairs at most maxTargets addresses with port.
func withPort(as []netip.Addr, port uint16) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, min(len(as), maxTargets))
	for _, a := range as[:min(len(as), maxTargets)] {
		out = append(out, netip.AddrPortFrom(a, port))
	}
	return out
}

// sortSRV orders SRV records by priority, then by descending weight
// (deterministic instead of RFC 2782's weighted random draw: every target
// is probed anyway). A target of "." (the service is not offered) is
// left out.
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
func (r *resolver) lookup(ctx context.Context, v *view, name string, qtype uint16) ([]dns.RR, error) {
	key := cacheKey{name, qtype}
	now := time.Now()
	if rrs, ok := r.cached(key, now); ok {
		return rrs, nil
	}
	q := new(dns.Msg).SetQuestion(name, qtype)
	q.SetEdns0(ednsSize, false) // room for many SRV/A records over UDP
	resp, err := r.ask(ctx, &v.conf, q)
	if err != nil {
		return nil, err
	}
	rrs, ttl := answers(resp, qtype)
	r.mu.Lock()
	if len(r.cache) >= maxCache {
		clear(r.cache)
	}
	r.cache[key] = cacheEntry{rrs: rrs, expires: now.Add(ttl)}
	r.mu.Unlock()
	return rrs, nil
}

// cached returns the records of key while their TTL lasts.
func (r *resolver) cached(key cacheKey, now time.Time) ([]dns.RR, bool) {
	r.mu.Lock()
	e, ok := r.cache[key]
	r.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.rrs, true
}

// answers picks the records of qtype and their smallest TTL; an empty
// answer is cached per the SOA minimum (RFC 2308), capped.
func answers(resp *dns.Msg, qtype uint16) ([]dns.RR, time.Duration) {
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
	return rrs, max(ttl, minTTL)
}
