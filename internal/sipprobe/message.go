package sipprobe

import "strconv"

// branchPrefix starts every Via branch this prober sends: the RFC 3261
// magic cookie (section 8.1.1.7) and "qd"; 16 hex digits of a random
// 64-bit transaction key follow.
const branchPrefix = "z9hG4bKqd"

// request holds what varies between the OPTIONS requests of one route; the
// route's constant parts are strings built once.
type request struct {
	ruri      string // Request-URI: the contact
	to        string // To header value: "<contact>"; "" means "<" ruri ">"
	route     string // Route header value, or ""
	transport string // Via transport token: UDP, TCP or TLS
	sentBy    string // Via sent-by: local host:port
	fromUser  string
	fromHost  string // From URI host; the sent-by when not configured
	userAgent string
	key       uint64 // branch
	callID    uint64
	fromTag   uint64
	cseq      uint32
	authName  string // Authorization or Proxy-Authorization, or ""
	authValue string
}

// appendRequest appends the OPTIONS request r to b (RFC 3261 section 11)
// and returns the extended slice. It allocates only when b is too small.
func appendRequest(b []byte, r *request) []byte {
	b = append(b, "OPTIONS "...)
	b = append(b, r.ruri...)
	b = append(b, " SIP/2.0\r\nVia: SIP/2.0/"...)
	b = append(b, r.transport...)
	b = append(b, ' ')
	b = append(b, r.sentBy...)
	b = append(b, ";rport;branch="+branchPrefix...)
	b = appendHex(b, r.key)
	b = append(b, "\r\nMax-Forwards: 70\r\n"...)
	if r.route != "" {
		b = appendHeader(b, "Route", r.route)
	}
	b = append(b, "From: <sip:"...)
	b = append(b, r.fromUser...)
	b = append(b, '@')
	b = append(b, r.fromHost...)
	b = append(b, ">;tag="...)
	b = appendHex(b, r.fromTag)
	b = append(b, "\r\nTo: "...)
	if r.to == "" { // "<" ruri ">", not stored (see fastRoute)
		b = append(b, '<')
		b = append(b, r.ruri...)
		b = append(b, '>')
	} else {
		b = append(b, r.to...)
	}
	b = append(b, "\r\nCall-ID: "...)
	b = appendHex(b, r.callID)
	b = append(b, "\r\nCSeq: "...)
	b = strconv.AppendUint(b, uint64(r.cseq), 10)
	b = append(b, " OPTIONS\r\n"...)
	if r.authName != "" {
		b = appendHeader(b, r.authName, r.authValue)
	}
	b = appendHeader(b, "User-Agent", r.userAgent)
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
