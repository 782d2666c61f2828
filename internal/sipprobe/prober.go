package sipprobe

import (
	"crypto/tls"
	"net/netip"
	"sync"
)

// Prober sends SIP OPTIONS probes. It is safe for concurrent use by any
// number of goroutines; each Start or Probe call is one probe. Create it with New
// and stop it with Close.
type Prober struct {
	cfg     Config
	udp     *udpTransport
	table   *table
	timers  *timers
	streams *streams
	routes  routes
	dns     *resolver
	exts    sync.Pool // *txExt of TCP/TLS and digest probes
	bufs    sync.Pool // *[]byte: request buffers, held only while sending
	waiters sync.Pool // *waiter of Probe
	hdrs    headerCache
	stats   counters

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New opens the shared UDP socket and starts the receive and timer
// goroutines. The returned Prober must be closed.
func New(cfg Config) (*Prober, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	u, err := listenUDP(&cfg)
	if err != nil {
		return nil, err
	}
	p := &Prober{cfg: cfg, udp: u, dns: newResolver(cfg.Resolver, cfg.systemFiles()), stop: make(chan struct{})}
	p.table = newTable(&p.stats)
	p.table.finish = p.finish
	p.exts.New = func() any { return new(txExt) }
	p.waiters.New = func() any { return newWaiter() }
	p.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	p.timers = &timers{tb: p.table, counts: &p.stats, send: func(b []byte, d netip.AddrPort) { _ = u.send(b, d) },
		redial: func(r redial) { go p.redial(r) }}
	p.streams = &streams{slots: make(map[streamKey]*streamSlot), tls: tlsBase(cfg.TLS), idle: cfg.StreamIdle, serve: p.serveStream,
		clock: p.table.now, legacy: cfg.LegacyStreams}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.readLoop() }()
	go func() { defer p.wg.Done(); p.timers.run(p.stop) }()
	return p, nil
}

func tlsBase(c *tls.Config) *tls.Config {
	if c == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return c
}

// Addr returns the local address of the shared UDP socket.
func (p *Prober) Addr() netip.AddrPort { return p.udp.local }

// Close fails the probes in flight with reason transport, closes every
// socket and connection, and waits for the reading and timer goroutines.
// A DNS lookup or a dial still running is not waited for: when it returns
// it fails its probe with reason transport ("prober closed"). It is
// idempotent; Probe after Close fails with reason transport.
func (p *Prober) Close() error {
	p.closeOnce.Do(func() {
		p.table.close()
		close(p.stop)
		p.closeErr = p.udp.conn.Close()
		p.streams.close()
		p.wg.Wait()
	})
	return p.closeErr
}
