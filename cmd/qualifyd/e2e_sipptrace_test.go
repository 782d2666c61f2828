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

// What the calls' Asterisk tests read: a SIPp trunk's own log of the
// messages it received and sent, and qualifyd's log lines as it prints
// them.

// tracedPeer is a SIPp trunk on a loopback port of its own that logs
// every message it receives and sends (-trace_msg); swap changes its
// scenario on the same port.
type tracedPeer struct {
	t    *testing.T
	port int
	dir  string
	logs []string // one message file per SIPp run
	cmd  *exec.Cmd
}

func newTracedPeer(t *testing.T, scenario string) *tracedPeer {
	p := &tracedPeer{t: t, port: freePort(t, "udp"), dir: t.TempDir()}
	p.start(scenario)
	t.Cleanup(p.kill)
	return p
}

func (p *tracedPeer) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *tracedPeer) start(scenario string) {
	sf, _ := filepath.Abs(scenario)
	log := filepath.Join(p.dir, fmt.Sprintf("messages-%d.log", len(p.logs)))
	p.logs = append(p.logs, log)
	p.cmd = exec.Command(requirePeer(p.t, "sipp"), "-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(p.port), "-t", "u1",
		"-nostdin", "-deadcall_wait", "0", "-max_recv_loops", "1000", "-key", "contact", p.addr(),
		"-trace_msg", "-message_file", log)
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
func (p *tracedPeer) kill() {
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// swap restarts the trunk on its port with another scenario.
func (p *tracedPeer) swap(scenario string) {
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
func (p *tracedPeer) messages() []sipMessage {
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
func (p *tracedPeer) options(from, to time.Time) []time.Time {
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
func (p *tracedPeer) replies(prefix, method string) []time.Time {
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
