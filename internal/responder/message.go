package responder

import (
	"bytes"
	"strconv"
)

// request holds the header lines of an OPTIONS request that a response
// copies, as slices of the received datagram.
type request struct {
	vias                 [][]byte
	from, to, callID, cs []byte
	viaStore             [4][]byte
}

// transaction names the request: Call-ID, CSeq and top Via, which every
// retransmission repeats.
func (r *request) transaction() string {
	return string(r.callID) + "\x00" + string(r.cs) + "\x00" + string(r.vias[0])
}

// parseOptions splits an OPTIONS request into the headers a response needs;
// false for anything else.
func parseOptions(msg []byte) (*request, bool) {
	if !bytes.HasPrefix(msg, []byte("OPTIONS ")) {
		return nil, false
	}
	end := bytes.Index(msg, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, false
	}
	req := &request{}
	req.vias = req.viaStore[:0]
	lines := msg[:end]
	first := bytes.Index(lines, []byte("\r\n"))
	if first < 0 {
		return nil, false
	}
	for _, line := range bytes.Split(lines[first+2:], []byte("\r\n")) {
		req.add(line)
	}
	return req, len(req.vias) > 0 && req.from != nil && req.to != nil && req.callID != nil && req.cs != nil
}

// add files one header line under its (full or compact) name.
func (r *request) add(line []byte) {
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return
	}
	name := bytes.ToLower(bytes.TrimSpace(line[:colon]))
	value := bytes.TrimSpace(line[colon+1:])
	switch string(name) {
	case "via", "v":
		r.vias = append(r.vias, value)
	case "from", "f":
		r.from = value
	case "to", "t":
		r.to = value
	case "call-id", "i":
		r.callID = value
	case "cseq":
		r.cs = value
	}
}

// appendResponse appends the final response to req with status code (200
// when zero) to out.
func appendResponse(out []byte, req *request, code int) []byte {
	if code == 0 {
		code = 200
	}
	out = append(out, "SIP/2.0 "...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, ' ')
	out = append(out, reasonPhrase(code)...)
	out = append(out, "\r\n"...)
	for _, v := range req.vias {
		out = appendHeader(out, "Via", v)
	}
	out = appendHeader(out, "From", req.from)
	out = appendHeader(out, "To", req.to)
	if !bytes.Contains(req.to, []byte(";tag=")) {
		out = out[:len(out)-2]
		out = append(out, ";tag=qualifyd-responder\r\n"...)
	}
	out = appendHeader(out, "Call-ID", req.callID)
	out = appendHeader(out, "CSeq", req.cs)
	out = append(out, "Allow: OPTIONS\r\nContent-Length: 0\r\n\r\n"...)
	return out
}

func appendHeader(out []byte, name string, value []byte) []byte {
	out = append(out, name...)
	out = append(out, ": "...)
	out = append(out, value...)
	return append(out, "\r\n"...)
}

func reasonPhrase(code int) string {
	switch code {
	case 200:
		return "OK"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 486:
		return "Busy Here"
	case 503:
		return "Service Unavailable"
	}
	return "Response"
}
