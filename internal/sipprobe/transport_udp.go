package sipprobe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// udpTransport is the shared UDP socket of a Prober.
type udpTransport struct {
	conn  *net.UDPConn
	local netip.AddrPort
	// localSentBy is local as a sent-by, when it is a specific address.
	localSentBy string
	// sentBy caches the Via sent-by per destination address when the socket
	// is bound to an unspecified address (the source address the kernel
	// picks for that destination).
	mu     sync.RWMutex
	sentBy map[netip.Addr]string
}

// listenUDP opens the shared socket with large kernel buffers.
func listenUDP(cfg *Config) (*udpTransport, error) {
	laddr, err := net.ResolveUDPAddr("udp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("sipprobe: listen %q: %w", cfg.ListenAddr, err)
	}
	conn, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return nil, fmt.Errorf("sipprobe: listen %q: %w", cfg.ListenAddr, err)
	}
	setBuffers(conn, cfg.ReadBuffer, cfg.WriteBuffer)
	local := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	return &udpTransport{conn: conn, local: local, localSentBy: hostPort(local), sentBy: make(map[netip.Addr]string)}, nil
}

// setBuffers sets the socket buffers, beyond the sysctl limits when the
// process may (SO_RCVBUFFORCE needs CAP_NET_ADMIN); errors leave the
// kernel defaults, which only cost drops under bursts.
func setBuffers(conn *net.UDPConn, rbuf, wbuf int) {
	_ = conn.SetReadBuffer(rbuf)
	_ = conn.SetWriteBuffer(wbuf)
	raw, err := conn.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, rbuf)
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, wbuf)
	})
}

// viaSentBy returns the sent-by for a probe to dest: the bound address, or
// the source address the kernel routes dest from.
func (u *udpTransport) viaSentBy(dest netip.Addr) (string, error) {
	if !u.local.Addr().IsUnspecified() {
		return u.localSentBy, nil
	}
	u.mu.RLock()
	s, ok := u.sentBy[dest]
	u.mu.RUnlock()
	if ok {
		return s, nil
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dest, 9)))
	if err != nil {
		return "", fmt.Errorf("no route to %s: %w", dest, err)
	}
	src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
	_ = c.Close()
	s = hostPort(netip.AddrPortFrom(src, u.local.Port()))
	u.mu.Lock()
	if len(u.sentBy) >= maxRoutes {
		clear(u.sentBy)
	}
	u.sentBy[dest] = s
	u.mu.Unlock()
	return s, nil
}

// send writes one datagram.
func (u *udpTransport) send(b []byte, dest netip.AddrPort) error {
	_, err := u.conn.WriteToUDPAddrPort(b, dest)
	return err
}

// readLoop receives datagrams until the socket is closed, handing each to
// p.handle. It reads into one buffer and allocates nothing per packet.
func (p *Prober) readLoop() {
	buf := make([]byte, 65536)
	for {
		n, src, err := p.udp.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error. No ICMP error comes here: the socket is
			// unconnected and without IP_RECVERR, so a UDP probe that
			// draws one times out (docs/qualify-semantics.md §3.2).
			continue
		}
		if n > p.cfg.MaxMessageSize {
			p.stats.oversized.Add(1)
			continue
		}
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		p.handle(buf[:n], src, nil, p.table.now())
	}
}
