package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The calls' tests' SIPp trunks, which a test kills or swaps on their
// port, and what the Asterisk ones read: a trunk's own log of the
// messages it received and sent, and qualifyd's log lines as it prints
// them.

// sippTrunk is a SIPp trunk on a loopback port of its own that a test
// kills and starts again, with the same scenario or another, on the same
// port: a trunk that dies, or that starts or stops draining. Traced, it
// logs every message it receives and sends (-trace_msg), one file per run.
type sippTrunk struct {
	t       *testing.T
	port    int
	contact string // the address its responses give as their Contact
	dir     string
	trace   bool
	logs    []string // one message file per SIPp run, when traced
	cmd     *exec.Cmd
}

// newSippTrunk starts SIPp playing scenario (a path from the package's
// directory) on a port of its own and kills it when the test ends.
func newSippTrunk(t *testing.T, scenario string, trace bool) *sippTrunk {
	t.Helper()
	port := freePort(t, "udp")
	return newSippTrunkAt(t, port, "127.0.0.1:"+strconv.Itoa(port), scenario, trace)
}

// newSippTrunkAt is newSippTrunk on port, giving contact as its Contact
// (a relay's address, for a trunk behind one).
func newSippTrunkAt(t *testing.T, port int, contact, scenario string, trace bool) *sippTrunk {
	t.Helper()
	p := &sippTrunk{t: t, port: port, contact: contact, dir: t.TempDir(), trace: trace}
	p.start(scenario)
	t.Cleanup(p.kill)
	return p
}

// newTracedPeer is a traced sippTrunk: the calls' Asterisk tests count
// the OPTIONS at the trunk, in its own log.
func newTracedPeer(t *testing.T, scenario string) *sippTrunk {
	t.Helper()
	return newSippTrunk(t, scenario, true)
}

func (p *sippTrunk) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// start starts SIPp playing scenario and waits until it has bound its
// port.
func (p *sippTrunk) start(scenario string) {
	p.t.Helper()
	sf, _ := filepath.Abs(scenario)
	args := []string{"-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(p.port), "-t", "u1",
		"-nostdin", "-deadcall_wait", "0", "-max_recv_loops", "1000", "-key", "contact", p.contact}
	if p.trace {
		log := filepath.Join(p.dir, fmt.Sprintf("messages-%d.log", len(p.logs)))
		p.logs = append(p.logs, log)
		args = append(args, "-trace_msg", "-message_file", log)
	}
	p.cmd = exec.Command(requirePeer(p.t, "sipp"), args...)
	p.cmd.Dir = p.dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	eventually(p.t, peerBound, "SIPp binds "+p.addr(), func() bool {
		c, err := net.ListenPacket("udp", p.addr())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// kill kills SIPp and waits for it; idempotent.
func (p *sippTrunk) kill() {
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// swap restarts the trunk on its port with another scenario.
func (p *sippTrunk) swap(scenario string) {
	p.kill()
	p.start(scenario)
}

// sipMessage is one message of SIPp's log.
type sipMessage struct {
	at       time.Time
	received bool
	start    string // the start line
	via      string // the top Via: one transaction
	cseq     string
}

// messages reads every message SIPp logged, in order.
func (p *sippTrunk) messages() []sipMessage {
	var out []sipMessage
	for _, path := range p.logs {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			p.t.Fatal(err)
		}
		for _, entry := range strings.Split(string(b), "----------------------------------------------- ")[1:] {
			if m, ok := parseSIPPEntry(entry); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// parseSIPPEntry reads one entry of SIPp's message log: its stamp, the
// direction, then the message.
func parseSIPPEntry(entry string) (sipMessage, bool) {
	var m sipMessage
	sc := bufio.NewScanner(strings.NewReader(entry))
	for i := 0; sc.Scan(); i++ {
		l := strings.TrimRight(sc.Text(), "\r")
		switch {
		case i == 0:
			at, err := time.ParseInLocation("2006-01-02 15:04:05.000000", strings.TrimSpace(l), time.Local)
			if err != nil {
				return m, false
			}
			m.at = at
		case i == 1:
			m.received = strings.Contains(l, "received")
		case m.start == "" && l != "":
			m.start = l
		case m.via == "" && strings.HasPrefix(l, "Via:"):
			m.via = l
		case m.cseq == "" && strings.HasPrefix(l, "CSeq:"):
			m.cseq = l
		}
	}
	return m, m.start != ""
}

// options returns when each OPTIONS transaction reached the trunk within
// [from, to) (retransmissions counted once).
func (p *sippTrunk) options(from, to time.Time) []time.Time {
	var out []time.Time
	seen := map[string]bool{}
	for _, m := range p.messages() {
		if m.received && strings.HasPrefix(m.start, "OPTIONS ") && !seen[m.via] && !m.at.Before(from) && m.at.Before(to) {
			seen[m.via] = true
			out = append(out, m.at)
		}
	}
	return out
}

// replies returns when the trunk sent each final response with status
// prefix (e.g. "SIP/2.0 200", "SIP/2.0 503") to a request of method
// (retransmissions counted once).
func (p *sippTrunk) replies(prefix, method string) []time.Time {
	var out []time.Time
	seen := map[string]bool{}
	for _, m := range p.messages() {
		if !m.received && strings.HasPrefix(m.start, prefix) && strings.HasSuffix(m.cseq, " "+method) && !seen[m.via] {
			seen[m.via] = true
			out = append(out, m.at)
		}
	}
	return out
}

// logbook keeps every line a qualifyd printed, read as it prints them.
type logbook struct {
	mu    sync.Mutex
	lines []string
}

func readLog(d *daemonProc) *logbook {
	b := &logbook{lines: slices.Clone(d.seen)}
	go func() {
		for l := range d.lines {
			b.mu.Lock()
			b.lines = append(b.lines, l)
			b.mu.Unlock()
		}
	}()
	return b
}

// find returns the lines containing every one of parts.
func (b *logbook) find(parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// wait returns the first line containing every one of parts, waiting for
// it (the bound only stops a broken run).
func (b *logbook) wait(t *testing.T, bound time.Duration, parts ...string) string {
	t.Helper()
	var got []string
	eventually(t, bound, fmt.Sprintf("a line with %q", parts), func() bool { got = b.find(parts...); return len(got) > 0 })
	return got[0]
}
