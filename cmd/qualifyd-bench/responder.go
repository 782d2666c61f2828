package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// ports is what the responder child announces on its first output line.
type ports struct {
	Live []netip.AddrPort `json:"live"`
	Dead []netip.AddrPort `json:"dead"`
	// Flip are the sockets that answer until told "flip", then drop.
	Flip []netip.AddrPort `json:"flip,omitempty"`
}

// runResponder is `scale responder`: the scale benchmark's peer,
// run as a child process so that its CPU is not counted as the prober's.
// It answers OPTIONS on --live sockets and drops them on --dead sockets,
// answers them on --flip sockets until a "flip" line on stdin, then drops
// them there until an "unflip" line (each answered "flipped"), prints the ports as one
// JSON line, then answers each "counts" line on stdin with "answered
// dropped ignored". It exits when stdin closes.
func runResponder(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("responder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	live := fs.Int("live", 16, "answering sockets")
	dead := fs.Int("dead", 0, "silent sockets")
	flip := fs.Int("flip", 0, "sockets that answer until told to flip, then drop")
	host := fs.String("host", "127.0.0.1", "loopback address to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	lg, err := responder.ListenGroup(*host, *live, nil)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench responder:", err)
		return 1
	}
	defer lg.Close()
	dg, err := responder.ListenGroup(*host, *dead, func(netip.AddrPort) responder.Action { return responder.Action{Drop: true} })
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench responder:", err)
		return 1
	}
	defer dg.Close()
	var flipped atomic.Bool
	fg, err := responder.ListenGroup(*host, *flip, func(netip.AddrPort) responder.Action { return responder.Action{Drop: flipped.Load()} })
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench responder:", err)
		return 1
	}
	defer fg.Close()
	b, _ := json.Marshal(ports{Live: lg.Addrs(), Dead: dg.Addrs(), Flip: fg.Addrs()})
	fmt.Fprintln(stdout, string(b))
	sc := bufio.NewScanner(stdin)
	for sc.Scan() && ctx.Err() == nil {
		if cmd := sc.Text(); cmd == "flip" || cmd == "unflip" {
			flipped.Store(cmd == "flip")
			fmt.Fprintln(stdout, "flipped")
			continue
		}
		a, _, i := lg.Counts()
		_, d, i2 := dg.Counts()
		a3, d3, i3 := fg.Counts()
		fmt.Fprintln(stdout, a+a3, d+d3, i+i2+i3)
	}
	return 0
}

// child is a running responder child process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	ports ports
}

// startResponder re-executes this binary as `scale responder`.
func startResponder(ctx context.Context, live, dead int) (*child, error) {
	return spawnResponder(ctx, "--live", fmt.Sprint(live), "--dead", fmt.Sprint(dead))
}

// spawnResponder runs `scale responder` with args and reads its ports.
func spawnResponder(ctx context.Context, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"scale", "responder"}, args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !c.out.Scan() {
		c.stop()
		return nil, fmt.Errorf("responder child: no ports announced")
	}
	if err := json.Unmarshal(c.out.Bytes(), &c.ports); err != nil {
		c.stop()
		return nil, fmt.Errorf("responder child: %w", err)
	}
	return c, nil
}

// counts asks the child for its totals: requests answered, requests
// dropped (dead sockets), datagrams ignored.
func (c *child) counts() (answered, dropped, ignored uint64, err error) {
	if _, err := io.WriteString(c.in, "counts\n"); err != nil {
		return 0, 0, 0, err
	}
	if !c.out.Scan() {
		return 0, 0, 0, fmt.Errorf("responder child: no counts")
	}
	_, err = fmt.Sscan(strings.TrimSpace(c.out.Text()), &answered, &dropped, &ignored)
	return answered, dropped, ignored, err
}

// flip makes the child's flip sockets drop every request from now on
// (drop true) or answer again (false).
func (c *child) flip(drop bool) error {
	cmd := "unflip\n"
	if drop {
		cmd = "flip\n"
	}
	if _, err := io.WriteString(c.in, cmd); err != nil {
		return err
	}
	if !c.out.Scan() || c.out.Text() != "flipped" {
		return fmt.Errorf("responder child: flip not acknowledged")
	}
	return nil
}

// pid returns the child's process ID.
func (c *child) pid() int { return c.cmd.Process.Pid }

// stop closes the child's stdin and waits for it to exit.
func (c *child) stop() {
	_ = c.in.Close()
	_ = c.cmd.Wait()
}
