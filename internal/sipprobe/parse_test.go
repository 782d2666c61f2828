package sipprobe

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"

	"github.com/emiago/sipgo/sip"
)

const okResponse = "SIP/2.0 200 OK\r\n" +
	"Via: SIP/2.0/UDP 127.0.0.1:5060;rport=5060;branch=z9hG4bKqd0123456789abcdef;received=127.0.0.1\r\n" +
	"Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bKsecond\r\n" +
	"From: <sip:qualifyd@127.0.0.1>;tag=1\r\nTo: <sip:pbx@127.0.0.1>;tag=2\r\n" +
	"Call-ID: 00000000000000ff\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"

func TestParseMessage(t *testing.T) {
	var m message
	if err := parseMessage([]byte(okResponse), &m); err != nil {
		t.Fatal(err)
	}
	if m.request || m.code != 200 || string(m.branch) != "z9hG4bKqd0123456789abcdef" ||
		string(m.callID) != "00000000000000ff" || m.cseq != 1 || string(m.cseqMethod) != "OPTIONS" ||
		m.contentLen != 0 || m.headerLen != len(okResponse) {
		t.Fatalf("parsed %+v", m)
	}
	if key, ok := branchKey(m.branch); !ok || key != 0x0123456789abcdef {
		t.Errorf("branchKey = %x, %v", key, ok)
	}
}

func TestParseCompactAndCase(t *testing.T) {
	in := "SIP/2.0 401 Unauthorized\r\nv: SIP/2.0/TCP h;BRANCH=z9hG4bKqd0000000000000001\r\n" +
		"i: abc\r\ncseq: 2 OPTIONS\r\nwww-authenticate: Digest realm=\"r\"\r\nl: 0\r\n\r\n"
	var m message
	if err := parseMessage([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if m.code != 401 || string(m.callID) != "abc" || m.cseq != 2 || string(m.wwwAuth) != `Digest realm="r"` {
		t.Fatalf("parsed %+v", m)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		"empty":              "",
		"no empty line":      strings.TrimSuffix(okResponse, "\r\n"),
		"bad version":        strings.Replace(okResponse, "SIP/2.0 200", "SIP/3.0 200", 1),
		"bad code":           strings.Replace(okResponse, "200 OK", "2x0 OK", 1),
		"code too big":       strings.Replace(okResponse, "200 OK", "999 OK", 1),
		"no branch":          strings.Replace(okResponse, ";branch=z9hG4bKqd0123456789abcdef", "", 1),
		"no call-id":         strings.Replace(okResponse, "Call-ID: 00000000000000ff\r\n", "", 1),
		"bad cseq":           strings.Replace(okResponse, "CSeq: 1 OPTIONS", "CSeq: x OPTIONS", 1),
		"cseq no method":     strings.Replace(okResponse, "CSeq: 1 OPTIONS", "CSeq: 1", 1),
		"header no colon":    strings.Replace(okResponse, "Content-Length: 0", "Content-Length 0", 1),
		"request no version": "OPTIONS sip:x\r\n\r\n",
	}
	for name, in := range cases {
		var m message
		if err := parseMessage([]byte(in), &m); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, m)
		}
	}
}

// TestRequestRoundTrip: the hand-built request parses with sipgo and with
// parseMessage, field for field.
func TestRequestRoundTrip(t *testing.T) {
	h := headers{route: "<sip:proxy.example;lr>", transport: "UDP", sentBy: "192.0.2.1:5070", fromUser: "qualifyd",
		fromHost: "192.0.2.1:5070", userAgent: "qualifyd"}
	r := request{ruri: "sip:pbx@192.0.2.7:5060;transport=udp", hdr: &h, key: 0xfeed, callID: 0xbeef, cseq: 1}
	auth := `Digest username="a"`
	b := appendRequest(nil, &r, "Authorization", auth)
	msg, err := sip.ParseMessage(b)
	if err != nil {
		t.Fatalf("sipgo: %v\n%s", err, b)
	}
	req := msg.(*sip.Request)
	branch, _ := req.Via().Params.Get("branch")
	if branch != "z9hG4bKqd000000000000feed" || req.CallID().Value() != "000000000000beef" ||
		req.GetHeader("Route").Value() != h.route || req.GetHeader("Authorization").Value() != auth ||
		req.To().Address.String() != "sip:pbx@192.0.2.7:5060;transport=udp" {
		t.Errorf("sipgo sees\n%s", b)
	}
	var m message
	if err := parseMessage(b, &m); err != nil || !m.request || string(m.method) != "OPTIONS" || !bytes.Equal(m.branch, []byte(branch)) {
		t.Errorf("parseMessage: %+v, %v", m, err)
	}
}

func TestParseAllocs(t *testing.T) {
	b := []byte(okResponse)
	var m message
	if n := testing.AllocsPerRun(100, func() { _ = parseMessage(b, &m) }); n != 0 {
		t.Errorf("parseMessage allocates %v times", n)
	}
	r := request{ruri: "sip:pbx@192.0.2.7", hdr: &headers{transport: "UDP", sentBy: "h:1", fromUser: "u", fromHost: "h", userAgent: "ua"}}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = appendRequest(buf[:0], &r, "", "") }); n != 0 {
		t.Errorf("appendRequest allocates %v times", n)
	}
}

// FuzzParseMessage: no input crashes the parser, and whatever parses has
// consistent offsets; a message not built from our branch never matches.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(okResponse))
	f.Add([]byte(strings.Replace(okResponse, "200 OK", "100 Trying", 1)))
	f.Add([]byte("OPTIONS sip:a@b SIP/2.0\r\nv: SIP/2.0/UDP h;branch=z9hG4bK1\r\ni: x\r\nCSeq: 1 OPTIONS\r\n\r\n"))
	f.Add([]byte("SIP/2.0 407 P\nVia: x;branch=b\nCall-ID: c\nCSeq: 9 OPTIONS\nProxy-Authenticate: Digest\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m message
		if err := parseMessage(b, &m); err != nil {
			return
		}
		if m.headerLen > len(b) || m.branch == nil || m.callID == nil {
			t.Fatalf("inconsistent parse %+v", m)
		}
		if !m.request && (m.code < 100 || m.code > 699) {
			t.Fatalf("code %d accepted", m.code)
		}
		tb := newTable(&counters{})
		if d, prov := tb.match(&m, netip.AddrPort{}, nil, 0); d == dropNone && !prov {
			t.Fatalf("matched with an empty table")
		}
	})
}

// FuzzHandle feeds messages to a live prober with one probe outstanding,
// as if they came from a spoofed source: none may match, none may crash,
// and each is counted exactly once.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(okResponse))
	f.Add([]byte(strings.Repeat("A", 9000)))
	f.Add([]byte("OPTIONS sip:a@b SIP/2.0\r\nv: SIP/2.0/UDP h;branch=z9hG4bK1\r\ni: x\r\nCSeq: 1 OPTIONS\r\n\r\n"))
	p, err := New(Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	tx := p.table.slab.acquire()
	tx.rec.req = request{callID: 0xff, cseq: 1, hdr: &headers{transport: "UDP"}}
	tx.rec.dest = netip.MustParseAddrPort("127.0.0.1:9")
	tx.cb = func(uint64, qualify.Result) {} // Close fails it
	tx.refs.Store(1)
	registerTx(f, p.table, tx, time.Hour, nil)
	// A final and a provisional response to the transaction, but from
	// elsewhere.
	for _, status := range []string{"200 OK", "100 Trying"} {
		f.Add([]byte("SIP/2.0 " + status + "\r\nVia: SIP/2.0/UDP h;branch=" + branchPrefix + string(appendHex(nil, tx.rec.req.key)) +
			"\r\nCall-ID: 00000000000000ff\r\nCSeq: 1 OPTIONS\r\n\r\n"))
	}
	// A response naming a slot never made.
	f.Add([]byte("SIP/2.0 100 Trying\r\nVia: SIP/2.0/UDP h;branch=" + branchPrefix + string(appendHex(nil, 0x77<<32|1<<31|3)) +
		"\r\nCall-ID: 00000000000000ff\r\nCSeq: 1 OPTIONS\r\n\r\n"))
	spoofed := netip.MustParseAddrPort("127.0.0.1:10")
	f.Fuzz(func(t *testing.T, b []byte) {
		before := total(p.Stats())
		if len(b) > p.cfg.MaxMessageSize {
			p.stats.oversized.Add(1) // as readLoop does
		} else {
			p.handle(b, spoofed, nil, p.table.now())
		}
		if s := p.Stats(); s.Matched != 0 || total(s) != before+1 {
			t.Fatalf("stats %+v after %q", s, b)
		}
	})
}

// total sums the counters that classify a received message.
func total(s Stats) uint64 {
	return s.Matched + s.Provisional + s.DroppedLate + s.DroppedDuplicate + s.DroppedWrongSource +
		s.DroppedMismatch + s.DroppedMalformed + s.DroppedOversized + s.DroppedRequests + s.OptionsAnswered
}
