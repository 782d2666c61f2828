package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The lab's addresses exist only inside its two namespaces (a /30 on the
// veth pair); nothing is configured in the root namespace.
const (
	proberIP    = "10.200.6.1"
	responderIP = "10.200.6.2"
	sipPort     = 5060
	nftTable    = "netdev qdlab"
	cmdTimeout  = 10 * time.Second // bound of every ip/nft command
	nsPrefix    = "qdlab-"
)

// netLab is one pair of network namespaces joined by a veth pair: the
// probers live in P, SIPp and the nftables impairment in R. The names carry
// the creating process's PID, so concurrent runs do not collide and a run
// that was killed can be recognised and removed by the next one.
type netLab struct {
	nsP, nsR string // namespace names
	ifP, ifR string // veth ends, at most 15 characters
}

// newNetLab names the lossy lab of the process with the given PID.
func newNetLab(pid int) netLab { return namedNetLab(nsPrefix, "qdl", pid) }

// namedNetLab names a lab of the process with the given PID: namespaces
// PREFIX<pid>-p and -r, veth ends TAG<pid>p and r.
func namedNetLab(prefix, tag string, pid int) netLab {
	return netLab{
		nsP: fmt.Sprintf("%s%d-p", prefix, pid), nsR: fmt.Sprintf("%s%d-r", prefix, pid),
		ifP: fmt.Sprintf("%s%dp", tag, pid), ifR: fmt.Sprintf("%s%dr", tag, pid),
	}
}

// runCmd runs one command with a deadline and returns its error with the
// command line and its output for context.
func runCmd(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// in runs a command inside namespace ns.
func in(ctx context.Context, ns, stdin string, args ...string) ([]byte, error) {
	return runCmd(ctx, stdin, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// up creates the namespaces, the veth pair and the nftables table. On
// error the caller still calls down, which removes whatever exists.
func (l netLab) up(ctx context.Context) error {
	steps := [][]string{
		{"netns", "add", l.nsP},
		{"netns", "add", l.nsR},
		{"link", "add", l.ifP, "netns", l.nsP, "type", "veth", "peer", "name", l.ifR, "netns", l.nsR},
		{"-n", l.nsP, "addr", "add", proberIP + "/30", "dev", l.ifP},
		{"-n", l.nsR, "addr", "add", responderIP + "/30", "dev", l.ifR},
		{"-n", l.nsP, "link", "set", "lo", "up"},
		{"-n", l.nsR, "link", "set", "lo", "up"},
		{"-n", l.nsP, "link", "set", l.ifP, "up"},
		{"-n", l.nsR, "link", "set", l.ifR, "up"},
	}
	for _, s := range steps {
		if _, err := runCmd(ctx, "", "ip", s...); err != nil {
			return fmt.Errorf("lab up: %w", err)
		}
	}
	if _, err := in(ctx, l.nsR, l.nftBase(), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("lab up: nftables: %w", err)
	}
	return nil
}

// nftBase is the responder's impairment table: SIP requests may be dropped
// on the veth's ingress, SIP responses on its egress, so both directions
// lose packets as on a real path (and SIPp's sends still succeed, as they
// would). The impair chains are refilled for each phase, with counters of
// the phase's own (see impair).
func (l netLab) nftBase() string {
	return fmt.Sprintf(`table %[1]s {
	chain impair_in { }
	chain impair_out { }
	chain ingress {
		type filter hook ingress device "%[2]s" priority 0; policy accept;
		jump impair_in
	}
	chain egress {
		type filter hook egress device "%[2]s" priority 0; policy accept;
		jump impair_out
	}
}
`, nftTable, l.ifR)
}

// impairment is what the path does to SIP packets in one phase.
type impairment struct {
	lossPercent int  // share of SIP packets dropped in each direction, 0..100
	dead        bool // drop every IPv4 packet towards the responder (ARP still works)
}

// impair replaces the impairment in one nftables transaction, as phase
// gen: its rules count what they see and drop in counters named after gen,
// so a packet is counted by the rules that handled it, those of the phase
// before when it was in flight while the rules changed.
func (l netLab) impair(ctx context.Context, im impairment, gen int) error {
	var b strings.Builder
	for _, name := range counterNames {
		fmt.Fprintf(&b, "add counter %s %s_%d\n", nftTable, name, gen)
	}
	fmt.Fprintf(&b, "flush chain %s impair_in\nflush chain %s impair_out\n", nftTable, nftTable)
	fmt.Fprintf(&b, "add rule %s impair_in udp dport %d counter name \"req_in_%d\"\n", nftTable, sipPort, gen)
	fmt.Fprintf(&b, "add rule %s impair_out udp sport %d counter name \"resp_out_%d\"\n", nftTable, sipPort, gen)
	switch {
	case im.dead:
		fmt.Fprintf(&b, "add rule %s impair_in udp dport %d counter name \"req_dropped_%d\" drop\n", nftTable, sipPort, gen)
		fmt.Fprintf(&b, "add rule %s impair_in meta protocol ip drop\n", nftTable)
	case im.lossPercent > 0:
		fmt.Fprintf(&b, "add rule %s impair_in udp dport %d numgen random mod 100 < %d counter name \"req_dropped_%d\" drop\n", nftTable, sipPort, im.lossPercent, gen)
		fmt.Fprintf(&b, "add rule %s impair_out udp sport %d numgen random mod 100 < %d counter name \"resp_dropped_%d\" drop\n", nftTable, sipPort, im.lossPercent, gen)
	}
	if _, err := in(ctx, l.nsR, b.String(), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("impair %+v: %w", im, err)
	}
	return nil
}

// counterNames are the counters of each phase, suffixed with its number.
var counterNames = []string{"req_in", "req_dropped", "resp_out", "resp_dropped"}

// nftCounters are the impairment table's packet counters.
type nftCounters struct {
	ReqIn, ReqDropped, RespOut, RespDropped uint64
}

// counters reads the counters of phase gen.
func (l netLab) counters(ctx context.Context, gen int) (nftCounters, error) {
	out, err := in(ctx, l.nsR, "", "nft", "-j", "list", "counters", "table", "netdev", "qdlab")
	if err != nil {
		return nftCounters{}, err
	}
	return parseCounters(out, gen)
}

// parseCounters reads phase gen's counters from `nft -j list counters`
// output.
func parseCounters(js []byte, gen int) (nftCounters, error) {
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nftCounters{}, fmt.Errorf("nft counters: %w", err)
	}
	var c nftCounters
	fields := map[string]*uint64{}
	for i, f := range []*uint64{&c.ReqIn, &c.ReqDropped, &c.RespOut, &c.RespDropped} {
		fields[fmt.Sprintf("%s_%d", counterNames[i], gen)] = f
	}
	for _, o := range doc.Nftables {
		if o.Counter != nil && fields[o.Counter.Name] != nil {
			*fields[o.Counter.Name] = o.Counter.Packets
		}
	}
	return c, nil
}

// down kills whatever still runs in the namespaces (only this lab's own
// processes can be there) and deletes them; the veth pair goes with them.
// It runs on its own deadline, so it works after ctx was cancelled.
func (l netLab) down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*cmdTimeout)
	defer cancel()
	var errs []error
	for _, ns := range []string{l.nsP, l.nsR} {
		if !nsExists(ctx, ns) {
			continue
		}
		killNamespace(ctx, ns)
		if _, err := runCmd(ctx, "", "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killNamespace sends SIGKILL to every process left in namespace ns.
func killNamespace(ctx context.Context, ns string) {
	out, err := runCmd(ctx, "", "ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// nsExists reports whether namespace ns exists.
func nsExists(ctx context.Context, ns string) bool {
	return slices.Contains(listNamespaces(ctx), ns)
}

// listNamespaces returns the names of the network namespaces.
func listNamespaces(ctx context.Context) []string {
	out, err := runCmd(ctx, "", "ip", "netns", "list")
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

var staleName = regexp.MustCompile(`^(?:` + nsPrefix + `|` + blipPrefix + `|` + dropPrefix + `)(\d+)-[pr]$`)

// removeStale deletes the namespaces of earlier runs whose process no
// longer exists (a run killed with SIGKILL cannot clean up after itself).
func removeStale(ctx context.Context) {
	for _, ns := range listNamespaces(ctx) {
		m := staleName.FindStringSubmatch(ns)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its run is still going
		}
		killNamespace(ctx, ns)
		_, _ = runCmd(ctx, "", "ip", "netns", "del", ns)
	}
}
