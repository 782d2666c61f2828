package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/daemon"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// runCheckConfig is "qualifyd check-config [--json | --connect]
// [--config-dir DIR] FILE": it reads FILE as qualifyd would and exits 0
// with a summary (or the effective AoR settings as JSON) and the
// configuration's warnings on stderr, 1 with the errors on stderr, or 2 on
// a usage error. With --connect it reads each source once (a source
// that cannot be read is an error), prints what it imports, then checks
// each sink's router and exits 1 if one cannot work. Without it sources
// are not read.
func runCheckConfig(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("check-config", flag.ContinueOnError)
	flags.SetOutput(stderr)
	asJSON := flags.Bool("json", false, "print the effective settings of every AoR as JSON")
	connect := flags.Bool("connect", false, "also read each source once and print what it imports, and contact each sink's router once, changing nothing: log in to Asterisk's Manager and check the user may run what the sink sends; read Kamailio's dispatcher.list and name the hosts it lacks; connect to a webhook's receiver without a request")
	dir := flags.String("config-dir", "", "directory that relative #include paths resolve against (default: FILE's directory)")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: qualifyd check-config [--json | --connect] [--config-dir DIR] FILE")
		flags.PrintDefaults()
	}
	pos, err := parseInterspersed(flags, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) != 1 || *asJSON && *connect {
		flags.Usage()
		return 2
	}
	opts := pjsip.Options{ConfigDir: *dir, NoteAsterisk: true}
	var reads []sourceRead
	if *connect {
		opts.Import = readSources(ctx, &reads)
	}
	cfg, err := pjsip.Load(pos[0], opts)
	if err != nil {
		for _, e := range pjsip.Errors(err) {
			fmt.Fprintf(stderr, "qualifyd check-config: %v\n", e)
		}
		return 1
	}
	warnSecrets(stderr, cfg)
	warnTLS(stderr, cfg)
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "qualifyd check-config: warning: %v\n", w)
	}
	for _, n := range cfg.NotAsterisk {
		fmt.Fprintf(stderr, "qualifyd check-config: warning: %v\n", n)
	}
	cl, clustered, err := daemon.CheckCluster(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd check-config: %v\n", err)
		return 1
	}
	if clustered {
		for _, w := range daemon.ClusterWarnings(cfg, cl) {
			fmt.Fprintf(stderr, "qualifyd check-config: warning: %v\n", w)
		}
	}
	if *asJSON {
		return writeJSON(stdout, stderr, cfg)
	}
	writeSummary(stdout, pos[0], cfg)
	if clustered {
		writeCluster(stdout, cfg.Cluster.Name, rawStore(cl, cfg.Cluster))
	}
	if *connect {
		writeSources(stdout, reads)
		code := checkSinks(ctx, stdout, stderr, cfg)
		if clustered && len(cfg.Sinks) > 0 {
			fmt.Fprintf(stdout, "sinks checked from this host only: any node may lead, run check-config --connect on each of %s\n", nodeNames(cl))
		}
		return code
	}
	return 0
}

// rawStore is cl with store= as written: CheckCluster replaced its
// {node} with the first node's name, and check-config speaks for every
// node.
func rawStore(cl cluster.Config, sec *pjsip.Cluster) cluster.Config {
	for _, o := range sec.Options {
		if o.Key == "store" {
			cl.Store = o.Value
		}
	}
	return cl
}

// nodeNames is "a, b and c".
func nodeNames(cl cluster.Config) string {
	names := make([]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		names[i] = n.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// plural is word for n things.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// checkSinks prints what sink.Check found of each sink's router: a line
// on stdout for each that can work or was not contacted, one on stderr
// for each that cannot, which makes the exit code 1.
func checkSinks(ctx context.Context, stdout, stderr io.Writer, cfg *pjsip.Config) int {
	code := 0
	for _, r := range sink.Check(ctx, cfg, nil) {
		head := fmt.Sprintf("sink %s (%s, %d %s)", r.Name, r.Driver, r.Objects, plural(r.Objects, "object"))
		switch {
		case r.Err != nil:
			fmt.Fprintf(stderr, "qualifyd check-config: %s: %v\n", head, r.Err)
			code = 1
		case r.Skipped != "":
			fmt.Fprintf(stdout, "%s: not contacted: %s\n", head, r.Skipped)
		default:
			fmt.Fprintf(stdout, "%s: OK: %s\n", head, r.Found)
		}
		if len(r.Unlisted) > 0 {
			fmt.Fprintf(stderr, "qualifyd check-config: warning: %s: the router does not list %s: the sink never changes them\n",
				head, strings.Join(r.Unlisted, ", "))
		}
	}
	if len(cfg.Sinks) == 0 {
		fmt.Fprintln(stdout, "no sinks to check")
	}
	return code
}

// aorJSON is one AoR's effective settings: defaults and fallbacks
// resolved, times in seconds.
type aorJSON struct {
	Name     string   `json:"name"`
	Contacts []string `json:"contacts"`
	qualify.Report
	OutboundProxy string `json:"outbound_proxy"`
}

// effective resolves an AoR's settings as the engine applies them (see
// qualify.Policy.Effective).
func effective(a pjsip.AoR) aorJSON {
	p := a.PolicyValue()
	return aorJSON{
		Name:          a.Name,
		Contacts:      append([]string{}, a.Contacts...),
		Report:        p.Report(),
		OutboundProxy: a.OptionsValue().OutboundProxy,
	}
}

// writeJSON prints {"aors": [...]} indented by two spaces, as one
// json.Encoder would, but an AoR at a time through a buffer: encoding the
// whole document at once held it in memory, 2 GB at a million AoRs.
func writeJSON(stdout, stderr io.Writer, cfg *pjsip.Config) int {
	w := bufio.NewWriter(stdout)
	w.WriteString("{\n  \"aors\": [")
	for i, a := range cfg.AoRs {
		b, err := json.MarshalIndent(effective(a), "    ", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "qualifyd check-config: %v\n", err)
			return 1
		}
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString("\n    ")
		w.Write(b)
	}
	if len(cfg.AoRs) > 0 {
		w.WriteString("\n  ")
	}
	w.WriteString("]")
	if len(cfg.Sinks) > 0 {
		b, err := json.MarshalIndent(sinksJSON(cfg.Sinks), "  ", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "qualifyd check-config: %v\n", err)
			return 1
		}
		w.WriteString(",\n  \"sinks\": ")
		w.Write(b)
	}
	w.WriteString("\n}\n")
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "qualifyd check-config: %v\n", err)
		return 1
	}
	return 0
}

// writeSummary prints one line for the file and one per AoR, buffered:
// a million AoRs were a million writes to stdout.
func writeSummary(stdout io.Writer, file string, cfg *pjsip.Config) {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	qualified, contacts, width := 0, 0, 0
	for _, a := range cfg.AoRs {
		contacts += len(a.Contacts)
		width = max(width, len(a.Name))
		if p := a.PolicyValue(); p.Enabled() && len(a.Contacts) > 0 {
			qualified++
		}
	}
	fmt.Fprintf(w, "%s: OK: %d AoRs (%d qualified), %d static contacts, %d endpoints\n",
		file, len(cfg.AoRs), qualified, contacts, len(cfg.Endpoints))
	for i := range cfg.AoRs {
		a := &cfg.AoRs[i]
		fmt.Fprintf(w, "  %-*s  ", width, a.Name)
		describe(w, summaryOf(a))
		w.WriteByte('\n')
	}
	writeTLS(w, cfg.TLS)
	writeSinks(w, cfg.Sinks)
}

// summaryOf is effective without the copy of the contacts, which
// describe only counts: a million AoRs were a million copies.
func summaryOf(a *pjsip.AoR) aorJSON {
	p := a.PolicyValue()
	return aorJSON{Name: a.Name, Contacts: a.Contacts, Report: p.Report(), OutboundProxy: a.OptionsValue().OutboundProxy}
}

// downText is the down interval as describe prints it: the backoff's
// range, as "2s..30s", or one interval.
func downText(r qualify.Report) string {
	if r.DownBackoff {
		return fmt.Sprintf("%gs..%gs", r.RetryInterval, r.DownInterval)
	}
	return fmt.Sprintf("%gs", r.DownInterval)
}

// describe writes one AoR's effective settings on one line, without its
// newline.
func describe(w *bufio.Writer, e aorJSON) {
	fmt.Fprintf(w, "contacts=%d", len(e.Contacts))
	if e.Frequency == 0 {
		w.WriteString(" qualify=off")
		return
	}
	fmt.Fprintf(w, " frequency=%gs timeout=%gs failures=%s retry=%gs down=%s successes=%d",
		e.Frequency, e.Timeout, failures(e.Report), e.RetryInterval, downText(e.Report), e.Successes)
	if e.FailureWindow > 0 {
		fmt.Fprintf(w, " window=%gs", e.FailureWindow)
	}
	if e.SuccessCodes != "" {
		w.WriteString(" success-codes=")
		w.WriteString(e.SuccessCodes)
	}
	if e.Only2xx {
		w.WriteString(" 2xx-only")
	}
	if e.LatencyOnly {
		w.WriteString(" latency-only")
	}
	if e.QuietOnly {
		w.WriteString(" quiet-only")
	}
	if e.CallFailureCodes != "" {
		w.WriteString(" call-failure-codes=")
		w.WriteString(e.CallFailureCodes)
	}
	if e.DrainMax > 0 {
		fmt.Fprintf(w, " drain-max=%gs", e.DrainMax)
	}
	if e.OutboundProxy != "" {
		w.WriteString(" proxy=")
		w.WriteString(e.OutboundProxy)
	}
}

// failures spells N, or the auto threshold's range and target.
func failures(r qualify.Report) string {
	if !r.FailuresAuto {
		return fmt.Sprint(r.Failures)
	}
	return fmt.Sprintf("auto(%d..%d,%g/day)", r.FailuresMin, r.FailuresMax, r.FalseOutagesPerDay)
}

// writeCluster prints the cluster section name: its nodes, the vantage
// rule, where NATS runs and the TTLs.
func writeCluster(stdout io.Writer, name string, c cluster.Config) {
	nodes := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = n.Name
		if n.Route != "" {
			nodes[i] += "@" + n.Route
		}
	}
	nats := "embedded, store " + c.Store + ", name " + c.Name + ", " + routesText(c)
	if c.NATSURL != "" {
		nats = "external, nats_url " + cluster.RedactURLs(c.NATSURL)
		if c.InsecureNATS {
			nats += ", its secret may go in clear (insecure_nats=yes)"
		}
	}
	fmt.Fprintf(stdout, "cluster %s: %d %s (%s), vantages %d, quorum %s, NATS %s, member_ttl %v, lease_ttl %v\n",
		name, len(c.Nodes), plural(len(c.Nodes), "node"), strings.Join(nodes, ", "), c.Vantages, c.Quorum, nats, c.MemberTTL, c.LeaseTTL)
}

// routesText says what protects the embedded server's routes.
func routesText(c cluster.Config) string {
	s := "routes in clear on loopback"
	switch {
	case c.RouteTLS():
		s = "routes mutual TLS"
	case c.InsecureRoutes:
		s = "routes in clear (insecure_routes=yes)"
	}
	if c.SecretFile != "" {
		s += " with secret_file"
	}
	return s
}
