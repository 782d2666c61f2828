package main

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// relay is a trunk's public UDP address: it passes datagrams between the
// trunk's callers (qualifyd, Kamailio) and the trunk's SIPp process, and
// counts what reaches the trunk. It is the test's network between the two,
// so the test can lose one probe or all traffic (as nftables would, without
// needing root or namespaces) while still seeing every request sent to the
// trunk, even when the trunk is "down".
type relay struct {
	front *net.UDPConn
	back  *net.UDPAddr
	wg    sync.WaitGroup

	mu       sync.Mutex
	legs     map[netip.AddrPort]*net.UDPConn // one socket towards SIPp per sender
	dead     bool                            // drop everything, both ways
	dropNext bool                            // drop the next OPTIONS transaction
	dropped  string                          // Call-ID of the dropped OPTIONS transaction
	invites  int
	options  map[string]bool // Call-IDs of the OPTIONS received
	answered map[string]bool // Call-IDs of the OPTIONS answered with 2xx
}

// relayTally counts the requests that reached a trunk's address.
type relayTally struct {
	// Invites is the number of INVITE requests (retransmissions included).
	Invites int
	// Options and Answered are the OPTIONS transactions (distinct
	// Call-IDs) received, and those SIPp answered with 2xx that were
	// passed back.
	Options, Answered int
}

// newRelay listens on an ephemeral loopback port and passes what it
// receives to back; it stops when the test ends.
func newRelay(t *testing.T, back netip.AddrPort) *relay {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{front: front, back: net.UDPAddrFromAddrPort(back), legs: map[netip.AddrPort]*net.UDPConn{},
		options: map[string]bool{}, answered: map[string]bool{}}
	r.wg.Add(1)
	go r.serveFront()
	t.Cleanup(r.close)
	return r
}

// Addr is the trunk's public address.
func (r *relay) Addr() netip.AddrPort { return r.front.LocalAddr().(*net.UDPAddr).AddrPort() }

// setDead makes the trunk unreachable (true) or reachable again.
func (r *relay) setDead(dead bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dead = dead
}

// dropNextOptions loses every datagram of the next OPTIONS transaction,
// which is then one probe that gets no answer at all (retransmissions
// included, whatever their timing).
func (r *relay) dropNextOptions() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropNext = true
}

// counts returns the tally so far.
func (r *relay) counts() relayTally {
	r.mu.Lock()
	defer r.mu.Unlock()
	return relayTally{Invites: r.invites, Options: len(r.options), Answered: len(r.answered)}
}

// droppedCallID is the Call-ID dropNextOptions lost, or "" if none yet.
func (r *relay) droppedCallID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

func (r *relay) close() {
	r.front.Close()
	r.mu.Lock()
	for _, l := range r.legs {
		l.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) serveFront() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, src, err := r.front.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil || !r.inbound(buf[:n]) {
			continue
		}
		if leg := r.leg(src); leg != nil {
			_, _ = leg.Write(buf[:n])
		}
	}
}

// leg returns the socket that carries src's datagrams to SIPp, so that
// SIPp's replies, sent to where the request came from, find their way back.
func (r *relay) leg(src netip.AddrPort) *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.legs[src]; ok {
		return l
	}
	l, err := net.DialUDP("udp", nil, r.back)
	if err != nil {
		return nil
	}
	r.legs[src] = l
	r.wg.Add(1)
	go r.serveLeg(l, src)
	return l
}

func (r *relay) serveLeg(l *net.UDPConn, src netip.AddrPort) {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := l.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		// A refused datagram (SIPp not listening yet) is a lost one.
		if err != nil || !r.outbound(buf[:n]) {
			continue
		}
		_, _ = r.front.WriteToUDPAddrPort(buf[:n], src)
	}
}

// inbound counts a datagram sent to the trunk and says whether to pass it.
func (r *relay) inbound(msg []byte) bool {
	method, callID := sipFirstToken(msg), sipHeader(msg, "call-id", "i")
	r.mu.Lock()
	defer r.mu.Unlock()
	switch method {
	case "INVITE":
		r.invites++
	case "OPTIONS":
		if r.dropNext && !r.dead && !r.options[callID] {
			r.dropNext, r.dropped = false, callID
		}
		r.options[callID] = true
	}
	return !r.dead && (callID == "" || callID != r.dropped)
}

// outbound counts a datagram from SIPp and says whether to pass it.
func (r *relay) outbound(msg []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return false
	}
	if bytes.HasPrefix(msg, []byte("SIP/2.0 2")) && strings.HasSuffix(sipHeader(msg, "cseq", ""), "OPTIONS") {
		r.answered[sipHeader(msg, "call-id", "i")] = true
	}
	return true
}

// sipFirstToken is a request's method (or "SIP/2.0" for a response).
func sipFirstToken(msg []byte) string {
	tok, _, _ := bytes.Cut(msg, []byte(" "))
	return string(tok)
}

// sipHeader is the value of the first header named name (or its compact
// form, if not ""), trimmed; "" if there is none.
func sipHeader(msg []byte, name, compact string) string {
	for _, line := range strings.Split(string(msg), "\r\n")[1:] {
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if ok && (strings.EqualFold(k, name) || compact != "" && strings.EqualFold(k, compact)) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
