// Package sipprobe sends SIP OPTIONS probes ("qualify") and returns what
// they measured, as qualify.Result values: RTT, status code and a typed
// failure reason. It owns the network side of qualifyd:
//
//   - one shared UDP socket per local address, and one reused TCP or TLS
//     connection per destination;
//   - a pending table keyed by Via branch that correlates responses with
//     probes (a response counts only if branch, Call-ID, CSeq, source
//     address and transport all match);
//   - one timer goroutine over a heap of due times for RFC 3261 Timer E
//     retransmissions and the qualify deadlines of every probe in flight;
//   - RFC 3263 DNS (SRV, then A/AAAA) with a TTL cache, digest answers to
//     401/407 challenges, outbound proxies, and 200 OK answers to
//     incoming OPTIONS.
//
// The prober returns data only: it never logs and touches no metrics; its
// counters are read with Prober.Stats.
package sipprobe
