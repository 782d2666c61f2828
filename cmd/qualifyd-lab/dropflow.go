package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// dropPrefix names the namespaces of a dropflow run.
const dropPrefix = "qddrop-"

// dropSettings are one dropflow run: the middlebox's memory, the probe
// policy, and how many cycles each prober is measured for.
type dropSettings struct {
	Forget    time.Duration // the middlebox forgets a flow this long without SIP data
	Frequency time.Duration // F: from the start of one cycle to the next
	Timeout   time.Duration // T of every probe
	Retry     time.Duration // R: from a failure to the next probe of the cycle
	Cycles    int           // measured, after one that dials the first connection
}

// shortDrop is the run of make lab: about 45 s. F leaves every flow idle
// for longer than Forget after its last answer, as F = 90 s did behind a
// 60 s middlebox, and the cycle before the redial (two timeouts and a
// redial, 2(T + R)) ends well inside F.
func shortDrop() dropSettings {
	return dropSettings{Forget: 2 * time.Second, Frequency: 6 * time.Second, Timeout: time.Second,
		Retry: 500 * time.Millisecond, Cycles: 6}
}

// validate rejects settings whose cycles would not let a flow be forgotten.
func (s dropSettings) validate() error {
	if s.Forget <= 0 || s.Timeout <= 0 || s.Retry <= 0 || s.Cycles <= 0 {
		return errors.New("dropflow: forget, timeout, retry and cycles must be positive")
	}
	if busy := 2*(s.Timeout+s.Retry) + s.Timeout; s.Frequency < busy+s.Forget {
		return fmt.Errorf("dropflow: frequency %v: want at least %v (a cycle's probes, then forget)", s.Frequency, busy+s.Forget)
	}
	return nil
}

// dropRow is what one prober saw over the measured cycles.
type dropRow struct {
	Mode     string `json:"mode"` // "before" (Config.LegacyStreams) or "redial"
	Cycles   int    `json:"cycles"`
	Failures []int  `json:"failures"` // per measured cycle
	Redials  uint64 `json:"redials"`
}

// total is the failures of all measured cycles.
func (r dropRow) total() int {
	n := 0
	for _, f := range r.Failures {
		n += f
	}
	return n
}

// worst is the most failures of one cycle.
func (r dropRow) worst() int {
	w := 0
	for _, f := range r.Failures {
		w = max(w, f)
	}
	return w
}

// dropReport is a whole run: the settings, a row per prober, and the
// packets the middlebox dropped.
type dropReport struct {
	Settings dropSettings `json:"settings"`
	Rows     []dropRow    `json:"rows"`
	Dropped  uint64       `json:"dropped_packets"`
}

// dropPreflight checks root and the tools.
func dropPreflight() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces and nftables)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("missing %s (Debian: apt-get install iproute2 nftables)", tool)
		}
	}
	return nil
}

// dropflow runs the experiment: namespaces joined by a veth, the
// middlebox's nftables table on the responder's side, the project's TCP
// responder there, and both probers (the rules before the redial and
// now) side by side in the prober's namespace. The namespaces and
// processes are gone when it returns.
func dropflow(ctx context.Context, s dropSettings, self string, progress io.Writer) (rep dropReport, err error) {
	if err := s.validate(); err != nil {
		return rep, err
	}
	if err := dropPreflight(); err != nil {
		return rep, err
	}
	removeStale(ctx)
	lab := namedNetLab(dropPrefix, "qdd", os.Getpid())
	defer func() { err = errors.Join(err, lab.down()) }()
	if err := lab.up(ctx); err != nil {
		return rep, err
	}
	if _, err := in(ctx, lab.nsR, middlebox(lab.ifR, s.Forget), "nft", "-f", "-"); err != nil {
		return rep, fmt.Errorf("dropflow: middlebox: %w", err)
	}
	peer, err := startProc("peer", lab.nsR, progress, self, "dropflow-peer", "-listen", fmt.Sprintf("%s:%d", responderIP, sipPort))
	if err != nil {
		return rep, err
	}
	defer peer.stop(stopGrace)
	rep.Settings = s
	if rep.Rows, err = runDropProber(ctx, lab, s, self, progress); err != nil {
		return rep, err
	}
	rep.Dropped, err = middleboxDropped(ctx, lab)
	return rep, err
}

// middlebox is the nftables table of a middlebox that forgets a TCP
// flow to the SIP port after forget without SIP data and then drops its
// packets both ways: a flow is a prober port in the live set, which a
// SYN adds and a packet with data (longer than any header-only segment,
// so not a keepalive) refreshes.
func middlebox(dev string, forget time.Duration) string {
	return fmt.Sprintf(`table netdev qddrop {
	set live { type inet_service; flags dynamic, timeout; timeout %[3]dms; }
	counter dropped { }
	chain in {
		type filter hook ingress device "%[1]s" priority -10; policy accept;
		meta protocol ip tcp dport %[2]d tcp flags & (syn | ack) == syn update @live { tcp sport } accept
		meta protocol ip tcp dport %[2]d tcp sport != @live counter name "dropped" drop
		meta protocol ip tcp dport %[2]d ip length > 120 update @live { tcp sport }
	}
	chain out {
		type filter hook egress device "%[1]s" priority -10; policy accept;
		meta protocol ip tcp sport %[2]d tcp dport != @live counter name "dropped" drop
		meta protocol ip tcp sport %[2]d ip length > 120 update @live { tcp dport }
	}
}
`, dev, sipPort, forget.Milliseconds())
}

// middleboxDropped reads how many packets the middlebox dropped.
func middleboxDropped(ctx context.Context, lab netLab) (uint64, error) {
	out, err := in(ctx, lab.nsR, "", "nft", "-j", "list", "counter", "netdev", "qddrop", "dropped")
	if err != nil {
		return 0, err
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return 0, fmt.Errorf("nft counter: %w", err)
	}
	for _, o := range doc.Nftables {
		if o.Counter != nil {
			return o.Counter.Packets, nil
		}
	}
	return 0, errors.New("nft counter: dropped not found")
}

// runDropProber runs the probers' process in the prober's namespace and
// collects its rows, one JSON line each.
func runDropProber(ctx context.Context, lab netLab, s dropSettings, self string, progress io.Writer) ([]dropRow, error) {
	var mu sync.Mutex
	var rows []dropRow
	w := &lineWriter{fn: func(line []byte) {
		mu.Lock()
		defer mu.Unlock()
		var r dropRow
		if err := json.Unmarshal(line, &r); err != nil || r.Mode == "" {
			fmt.Fprintf(progress, "%s\n", line)
			return
		}
		rows = append(rows, r)
	}}
	p, err := startProc("prober", lab.nsP, w, self, "dropflow-prober", "-target", fmt.Sprintf("%s:%d", responderIP, sipPort),
		"-bind", proberIP+":0", "-forget", s.Forget.String(), "-frequency", s.Frequency.String(),
		"-timeout", s.Timeout.String(), "-retry", s.Retry.String(), "-cycles", fmt.Sprint(s.Cycles))
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop(stopGrace)
		return nil, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	if p.err != nil || len(rows) != 2 {
		return rows, fmt.Errorf("dropflow prober: %v, %d rows", p.err, len(rows))
	}
	return rows, nil
}

// printDrop prints the report as a table.
func printDrop(w io.Writer, rep dropReport) {
	s := rep.Settings
	fmt.Fprintf(w, "a middlebox forgets a TCP flow after %v without SIP data; F=%v T=%v R=%v; %d cycles after the first; %d packets dropped\n",
		s.Forget, s.Frequency, s.Timeout, s.Retry, s.Cycles, rep.Dropped)
	fmt.Fprintf(w, "%-8s %16s %6s %14s %8s\n", "rules", "failures/cycle", "worst", "cycles >= 2/3", "redials")
	for _, r := range rep.Rows {
		two := 0
		for _, f := range r.Failures {
			if f >= 2 {
				two++
			}
		}
		fmt.Fprintf(w, "%-8s %16.2f %6d %14s %8d\n", r.Mode, float64(r.total())/float64(max(r.Cycles, 1)),
			r.worst(), fmt.Sprintf("%d/%d", two, r.Cycles), r.Redials)
	}
}

// runDropflow is `qualifyd-lab dropflow`.
func runDropflow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s := shortDrop()
	fs := flag.NewFlagSet("dropflow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dropFlags(fs, &s)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-lab dropflow:", err)
		return 1
	}
	rep, err := dropflow(ctx, s, self, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-lab dropflow:", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, rep)
	}
	printDrop(stdout, rep)
	return 0
}

// dropFlags defines the flags of the settings, shared with the prober.
func dropFlags(fs *flag.FlagSet, s *dropSettings) {
	fs.DurationVar(&s.Forget, "forget", s.Forget, "the middlebox forgets a flow after this long without SIP data")
	fs.DurationVar(&s.Frequency, "frequency", s.Frequency, "from one cycle's first probe to the next")
	fs.DurationVar(&s.Timeout, "timeout", s.Timeout, "qualify_timeout")
	fs.DurationVar(&s.Retry, "retry", s.Retry, "qualify_retry_interval: from a failure to the next probe")
	fs.IntVar(&s.Cycles, "cycles", s.Cycles, "cycles measured after the first")
}

// printJSON writes v indented; it returns the exit code.
func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}
