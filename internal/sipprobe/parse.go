package sipprobe

import (
	"bytes"
	"errors"
)

// errMalformed is returned by parseMessage for anything that is not a SIP
// message with the headers needed to match it.
var errMalformed = errors.New("malformed SIP message")

// message is the part of a SIP message the prober needs. Its byte slices
// point into the parsed buffer: they are valid until the buffer is reused.
type message struct {
	request    bool
	method     []byte // request method
	code       int    // response status code
	branch     []byte // branch of the topmost Via
	callID     []byte
	cseq       uint32
	cseqMethod []byte
	wwwAuth    []byte // first WWW-Authenticate value
	proxyAuth  []byte // first Proxy-Authenticate value
	retryAfter uint16 // Retry-After delta-seconds, 0 when absent or unreadable
	contentLen int    // -1 when absent
	headerLen  int    // bytes up to and including the empty line
}

// parseMessage parses the start line and the headers of b into m without
// allocating. It requires a topmost Via with a branch, a Call-ID and a
// CSeq, the headers that identify a transaction.
func parseMessage(b []byte, m *message) error {
	*m = message{contentLen: -1}
	line, rest, ok := nextLine(b)
	if !ok || !m.parseStartLine(line) {
		return errMalformed
	}
	for {
		line, rest, ok = nextLine(rest)
		if !ok {
			return errMalformed // no empty line: truncated
		}
		if len(line) == 0 {
			break
		}
		if !m.parseHeader(line) {
			return errMalformed
		}
	}
	m.headerLen = len(b) - len(rest)
	if m.branch == nil || m.callID == nil || m.cseqMethod == nil {
		return errMalformed
	}
	return nil
}

// nextLine splits b at the first LF, dropping a CR before it.
func nextLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false
	}
	line, rest = b[:i], b[i+1:]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, rest, true
}

var sipVersion = []byte("SIP/2.0")

// parseStartLine accepts "SIP/2.0 NNN reason" or "METHOD uri SIP/2.0".
func (m *message) parseStartLine(line []byte) bool {
	if bytes.HasPrefix(line, sipVersion) {
		if len(line) < 11 || line[7] != ' ' || (len(line) > 11 && line[11] != ' ') {
			return false
		}
		code, ok := atoi(line[8:11])
		m.code = code
		return ok && code >= 100 && code <= 699
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !bytes.HasSuffix(line, []byte(" SIP/2.0")) || len(line) < sp+10 {
		return false
	}
	m.request, m.method = true, line[:sp]
	return true
}

// parseHeader records the header in line if it is one the prober needs.
func (m *message) parseHeader(line []byte) bool {
	if line[0] == ' ' || line[0] == '\t' {
		return true // folded continuation (RFC 3261 section 7.3.1): not needed
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return false
	}
	name, value := bytes.TrimRight(line[:colon], " \t"), bytes.TrimSpace(line[colon+1:])
	switch {
	case isHeader(name, "Via", "v"):
		return m.branch != nil || m.parseVia(value)
	case isHeader(name, "Call-ID", "i"):
		m.callID = value
	case isHeader(name, "CSeq", ""):
		return m.parseCSeq(value)
	case isHeader(name, "Content-Length", "l"):
		n, ok := atoi(value)
		m.contentLen = n
		return ok
	case isHeader(name, "Retry-After", ""):
		m.retryAfter = retryAfter(value)
	case isHeader(name, "WWW-Authenticate", "") && m.wwwAuth == nil:
		m.wwwAuth = value
	case isHeader(name, "Proxy-Authenticate", "") && m.proxyAuth == nil:
		m.proxyAuth = value
	}
	return true
}

func isHeader(name []byte, long, compact string) bool {
	return bytes.EqualFold(name, []byte(long)) || (compact != "" && bytes.EqualFold(name, []byte(compact)))
}

// parseVia takes the branch parameter of the first value of the topmost
// Via header.
func (m *message) parseVia(value []byte) bool {
	if i := bytes.IndexByte(value, ','); i >= 0 {
		value = value[:i]
	}
	for len(value) > 0 {
		var param []byte
		param, value, _ = bytes.Cut(value, []byte{';'})
		name, v, _ := bytes.Cut(bytes.TrimSpace(param), []byte{'='})
		if bytes.EqualFold(bytes.TrimSpace(name), []byte("branch")) {
			m.branch = bytes.TrimSpace(v)
			return len(m.branch) > 0
		}
	}
	return false
}

// parseCSeq parses "number METHOD".
func (m *message) parseCSeq(value []byte) bool {
	num, method, ok := bytes.Cut(value, []byte{' '})
	if !ok {
		return false
	}
	n, ok := atoi(num)
	if !ok || n > 1<<31-1 {
		return false
	}
	m.cseq, m.cseqMethod = uint32(n), bytes.TrimSpace(method)
	return len(m.cseqMethod) > 0
}

// maxRetryAfter bounds a Retry-After as read: 18 hours, longer than any
// pause a peer asks for in practice; qualify_drain_max bounds the drain
// further (300 s by default).
const maxRetryAfter = 65535

// retryAfter reads a Retry-After value (RFC 3261 section 20.33:
// delta-seconds, then an optional comment and parameters), capped at
// maxRetryAfter; 0 for a value that does not begin with digits.
func retryAfter(value []byte) uint16 {
	end := 0
	for end < len(value) && value[end] >= '0' && value[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0
	}
	if end > 6 {
		return maxRetryAfter
	}
	n, _ := atoi(value[:end])
	return uint16(min(n, maxRetryAfter))
}

// atoi parses a non-negative decimal of at most 10 digits.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
