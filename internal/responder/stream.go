package responder

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
)

// maxStreamMessage bounds one request read from a connection.
const maxStreamMessage = 64 << 10

// Stream answers every OPTIONS request with 200 OK over TCP, back on the
// connection it came on (RFC 3261 section 18.2.2); it ignores whatever
// else arrives. It is the peer of the lab's TCP runs.
type Stream struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // open connections; mu
	once  sync.Once

	accepted, answered atomic.Uint64
}

// ListenStream opens a TCP listener on addr and starts answering.
func ListenStream(addr string) (*Stream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Stream{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr returns the listener's local address.
func (s *Stream) Addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

// Counts returns how many connections were accepted and requests
// answered.
func (s *Stream) Counts() (accepted, answered uint64) {
	return s.accepted.Load(), s.answered.Load()
}

// Close closes the listener and every connection and waits for them;
// idempotent.
func (s *Stream) Close() error {
	var err error
	s.once.Do(func() {
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return err
}

func (s *Stream) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers the requests of one connection until it ends.
func (s *Stream) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	var out []byte
	for {
		msg, err := readMessage(r)
		if err != nil {
			return
		}
		req, ok := parseOptions(msg)
		if !ok {
			continue
		}
		out = appendResponse(out[:0], req, 200)
		s.answered.Add(1) // before the write, as the datagram Responder counts: the prober may read its answer first
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// readMessage reads one message from r: its header lines up to the empty
// one, keep-alive CRLFs before it skipped, and its body of Content-Length
// bytes discarded.
func readMessage(r *bufio.Reader) ([]byte, error) {
	var msg []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		blank := len(bytes.TrimRight(line, "\r\n")) == 0
		if blank && len(msg) == 0 {
			continue
		}
		if msg = append(msg, line...); len(msg) > maxStreamMessage {
			return nil, errors.New("message too large")
		}
		if blank {
			break
		}
	}
	_, err := io.CopyN(io.Discard, r, contentLength(msg))
	return msg, err
}

// contentLength is the Content-Length (or l) header of msg, or 0.
func contentLength(msg []byte) int64 {
	for _, line := range bytes.Split(msg, []byte("\r\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		if n := string(bytes.ToLower(bytes.TrimSpace(name))); n == "content-length" || n == "l" {
			v, _ := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
			return max(v, 0)
		}
	}
	return 0
}
