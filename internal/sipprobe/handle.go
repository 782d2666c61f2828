package sipprobe

import (
	"net/netip"
	"time"

	"github.com/emiago/sipgo/sip"
)

// handle processes one received message from src (on conn, nil for UDP):
// a response is matched to its probe, an incoming OPTIONS is answered, and
// everything else is dropped and counted.
func (p *Prober) handle(b []byte, src netip.AddrPort, conn *streamConn, now instant) {
	var m message
	if err := parseMessage(b, &m); err != nil {
		p.stats.malformed.Add(1)
		return
	}
	if m.request {
		p.handleRequest(b, &m, src, conn)
		return
	}
	p.table.match(&m, src, conn, now)
}

// count records why a response did not complete a transaction; matched
// responses are counted by the table before it completes them.
func (c *counters) count(reason drop, provisional bool) {
	switch {
	case provisional:
		c.provisional.Add(1)
	case reason == dropLate:
		c.late.Add(1)
	case reason == dropDuplicate:
		c.duplicate.Add(1)
	case reason == dropWrongSource:
		c.wrongSource.Add(1)
	case reason == dropMismatch:
		c.mismatch.Add(1)
	}
}

// handleRequest answers an incoming OPTIONS (a peer qualifying us) with
// 200 OK, sent back where it came from (RFC 3581 rport behaviour). Other
// requests are dropped. This path is rare and uses sipgo's parser.
func (p *Prober) handleRequest(b []byte, m *message, src netip.AddrPort, conn *streamConn) {
	if string(m.method) != "OPTIONS" {
		p.stats.requests.Add(1)
		return
	}
	msg, err := sip.ParseMessage(b)
	req, ok := msg.(*sip.Request)
	if err != nil || !ok {
		p.stats.malformed.Add(1)
		return
	}
	req.SetSource(src.String())
	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	res.AppendHeader(sip.NewHeader("Allow", "OPTIONS"))
	res.AppendHeader(sip.NewHeader("User-Agent", p.cfg.UserAgent))
	cl := sip.ContentLengthHeader(0)
	res.AppendHeader(&cl)
	out := []byte(res.String())
	p.stats.optionsAnswered.Add(1)
	if conn != nil {
		_ = conn.write(out, time.Time{}) // a failed write breaks the connection
		return
	}
	_ = p.udp.send(out, src)
}
