// Package sipprobe sends SIP OPTIONS probes ("qualify") and returns what
// they measured, as qualify.Result values: RTT, status code and a typed
// failure reason. It owns the network side of qualifyd: one shared UDP
// socket per local address, one reused TCP or TLS connection per
// destination (closed when two timeouts in a row on it received nothing,
// or when idle, see streamConn), host names resolved as the system does (hosts file, every
// resolv.conf nameserver, RFC 3263 SRV), digest answers to 401/407
// challenges, outbound proxies, and 200 OK answers to incoming OPTIONS.
// It returns data only: it never logs and touches no metrics; its
// counters are read with Prober.Stats.
//
// # How a probe runs
//
// Every probe is one RFC 3261 non-INVITE client transaction
// (docs/qualify-semantics.md §3), or one per target of a host name, or
// two when it answers a digest challenge. A transaction is a slot of the
// pending table's slab holding the request, the state machine of
// transaction.go and the callback that receives the result; the table
// finds it by the slot number in its Via branch, and a response counts
// only if branch, Call-ID, CSeq, source address and transport all match.
// Start begins a probe and returns; Probe is Start and a wait on a pooled
// channel. There is no other way to run one.
//
// What runs where:
//
//   - The caller of Start builds the request of a UDP probe to an IP
//     address, registers its transaction and sends it.
//   - The receive goroutine (one per UDP socket, one per TCP/TLS
//     connection) parses each message, feeds a response to its
//     transaction's machine and, at the final response, calls the
//     probe's callback; it also answers incoming OPTIONS.
//   - The timer goroutine keeps one queue of every transaction's next
//     timer event (Timer E retransmission or the qualify deadline), a
//     FIFO with a heap for the events that come out of order, and fires
//     them in batches.
//   - A goroutine runs only for blocking I/O: the DNS lookup of a host
//     name, after which each target is a transaction of the table, and
//     the dial (when no connection is up) and write of a TCP/TLS probe.
//     No goroutine waits for a response.
//   - A digest retry (CSeq + 1, same Call-ID and From tag, RFC 3261
//     section 22.2) is a second transaction within the first one's
//     deadline, started by whichever of the receive goroutine and the
//     sender lets go of the first transaction last.
//
// # Why one table for everything
//
// One mechanism serves every transport, and the UDP probe to an IP
// address, the hot path (a million contacts at F = 60 s are 16,667
// probes a second), allocates nothing: the slab, the FIFO timer queue and
// the headers shared by every probe of a route keep it so. A probe in
// flight costs one slab transaction of 160 bytes and a 16-byte timer
// event; with every peer dead a million contacts keep about 50,000
// probes in flight, so a dead contact costs a few percent more memory
// than a live one, which is accepted.
//
// # What is written by hand
//
// The SIP parser and encoder of the hot path (parse.go, message.go)
// read and write only what a probe needs, without allocating (a probe
// with sipgo's client takes about 100 allocations, BenchmarkSipgoUDP);
// sipgo's parser is used where that does not matter: the URIs of routes,
// parsed once and cached, and incoming OPTIONS. DNS uses miekg/dns, digest
// github.com/icholy/digest.
package sipprobe
