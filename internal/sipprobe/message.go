package sipprobe

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
)

// branchPrefix starts every Via branch this prober sends: the RFC 3261
// magic cookie (section 8.1.1.7) and "qd"; 16 hex digits of the 64-bit
// transaction key follow (see newKey).
const branchPrefix = "z9hG4bKqd"

// request is one OPTIONS request: its Request-URI, the headers it shares
// with every probe of its route from one local address, and what is drawn
// for each probe. A probe in flight keeps it, to match the response and
// to build a retransmission, so the shared part is one pointer (as eight
// strings of its own they would be 128 bytes per probe in flight).
type request struct {
	ruri   string // Request-URI: the contact
	hdr    *headers
	key    uint64 // branch
	callID uint64 // random; the From tag is derived from it
	cseq   uint32
}

// fromTag is the From tag of the request, a bijection of its Call-ID so
// that a probe keeps one random number for both.
func (r *request) fromTag() uint64 {
	return bits.RotateLeft64(r.callID*0x9e3779b97f4a7c15, 29)
}

// headers are the parts of a request that do not vary between the probes
// of one route from one local address. The prober interns them (see
// headerCache): compare by pointer, never modify.
type headers struct {
	route     string // Route header value, or ""
	transport string // Via transport token: UDP, TCP or TLS
	sentBy    string // Via sent-by: local host:port
	fromUser  string
	fromHost  string // From URI host; the sent-by when not configured
	userAgent string
}

// appendRequest appends the OPTIONS request r to b (RFC 3261 section 11),
// with an Authorization or Proxy-Authorization header when authName is
// not empty, and returns the extended slice. It allocates only when b is
// too small.
func appendRequest(b []byte, r *request, authName, authValue string) []byte {
	h := r.hdr
	b = append(b, "OPTIONS "...)
	b = append(b, r.ruri...)
	b = append(b, " SIP/2.0\r\nVia: SIP/2.0/"...)
	b = append(b, h.transport...)
	b = append(b, ' ')
	b = append(b, h.sentBy...)
	b = append(b, ";rport;branch="+branchPrefix...)
	b = appendHex(b, r.key)
	b = append(b, "\r\nMax-Forwards: 70\r\n"...)
	if h.route != "" {
		b = appendHeader(b, "Route", h.route)
	}
	b = append(b, "From: <sip:"...)
	b = append(b, h.fromUser...)
	b = append(b, '@')
	b = append(b, h.fromHost...)
	b = append(b, ">;tag="...)
	b = appendHex(b, r.fromTag())
	b = append(b, "\r\nTo: <"...)
	b = append(b, r.ruri...)
	b = append(b, '>')
	b = append(b, "\r\nCall-ID: "...)
	b = appendHex(b, r.callID)
	b = append(b, "\r\nCSeq: "...)
	b = strconv.AppendUint(b, uint64(r.cseq), 10)
	b = append(b, " OPTIONS\r\n"...)
	if authName != "" {
		b = appendHeader(b, authName, authValue)
	}
	b = appendHeader(b, "User-Agent", h.userAgent)
	return append(b, "Accept: application/sdp\r\nContent-Length: 0\r\n\r\n"...)
}

func appendHeader(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, "\r\n"...)
}

const hexDigits = "0123456789abcdef"

// appendHex appends v as 16 lowercase hex digits.
func appendHex(b []byte, v uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(v>>uint(shift))&0xf])
	}
	return b
}

// parseHex16 decodes exactly 16 lowercase hex digits, as appendHex wrote.
func parseHex16(s []byte) (uint64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// branchKey returns the transaction key of a branch this prober sent.
func branchKey(branch []byte) (uint64, bool) {
	if len(branch) != len(branchPrefix)+16 || string(branch[:len(branchPrefix)]) != branchPrefix {
		return 0, false
	}
	return parseHex16(branch[len(branchPrefix):])
}

// headerCache interns headers, so that every probe in flight of a route
// from one local address points to one copy. The value returned last is
// compared first: consecutive probes nearly always share it, and equal
// strings taken from one route and one Config share their bytes, so the
// comparison is a few pointer compares.
type headerCache struct {
	last atomic.Pointer[headers]
	mu   sync.Mutex
	m    map[headers]*headers
}

// get returns the interned copy of h.
func (c *headerCache) get(h *headers) *headers {
	if l := c.last.Load(); l != nil && *l == *h {
		return l
	}
	c.mu.Lock()
	p := c.m[*h]
	if p == nil {
		if len(c.m) >= maxRoutes || c.m == nil {
			c.m = make(map[headers]*headers) // probes in flight keep theirs
		}
		p = new(headers)
		*p = *h
		c.m[*p] = p
	}
	c.mu.Unlock()
	c.last.Store(p)
	return p
}
