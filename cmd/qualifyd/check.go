package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// checkOptions are the flags of `qualifyd check`.
type checkOptions struct {
	timeout   time.Duration
	transport string
	only2xx   bool
	bind      string
	uri       string
}

func parseCheck(args []string, stderr io.Writer) (checkOptions, error) {
	var o checkOptions
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: qualifyd check [--timeout S] [--transport udp|tcp|tls] [--2xx-only] [--sip-bind ADDR:PORT] SIP-URI")
		fs.PrintDefaults()
	}
	secs := fs.Float64("timeout", 3, "qualify_timeout in seconds (<= 0: 32 s, the SIP transaction timeout)")
	fs.StringVar(&o.transport, "transport", "", "transport when the URI names none: udp, tcp or tls")
	fs.BoolVar(&o.only2xx, "2xx-only", false, "only a 2xx final response is a success (qualify_2xx_only)")
	fs.StringVar(&o.bind, "sip-bind", "", "local UDP address of the probe socket (default: an ephemeral port)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return o, err
	}
	if len(pos) != 1 {
		fs.Usage()
		return o, fmt.Errorf("want exactly one SIP-URI, got %d arguments", len(pos))
	}
	o.uri = pos[0]
	o.timeout = time.Duration(*secs * float64(time.Second))
	switch o.transport {
	case "", "udp", "tcp", "tls":
	default:
		return o, fmt.Errorf("--transport %q: want udp, tcp or tls", o.transport)
	}
	if !strings.HasPrefix(o.uri, "sip:") && !strings.HasPrefix(o.uri, "sips:") {
		return o, fmt.Errorf("%q is not a sip: or sips: URI", o.uri)
	}
	return o, nil
}

// runCheck sends one OPTIONS and prints one line: exit 0 on success, 1 on
// failure, 2 on a usage error.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseCheck(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "qualifyd check:", err)
		}
		return usageExit(err)
	}
	p, err := sipprobe.New(sipprobe.Config{ListenAddr: o.bind})
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd check:", err)
		return 1
	}
	defer p.Close()
	policy := qualify.Policy{Timeout: o.timeout, Only2xx: o.only2xx}
	opts := &probe.Options{Transport: o.transport}
	res := p.Probe(ctx, probe.Target{URI: o.uri, Timeout: policy.ProbeTimeout(), Options: opts})
	ok, reason := policy.Judge(res)
	fmt.Fprintln(stdout, checkLine(o.uri, res, ok, reason, policy.ProbeTimeout()))
	if !ok {
		return 1
	}
	return 0
}

// checkLine is the one line `qualifyd check` prints; it names the address
// probed when there was one (the target that answered, for a host name).
func checkLine(uri string, r qualify.Result, ok bool, reason qualify.Reason, timeout time.Duration) string {
	via := ""
	if a := r.Addr(); a != "" {
		via = " via " + a
	}
	if ok {
		return fmt.Sprintf("%s: Reachable%s, status %d, RTT %s msec", uri, via, r.Code, asterisk.Msec(r.RTT))
	}
	line := fmt.Sprintf("%s: Unreachable%s, %s", uri, via, asterisk.ReasonText(reason, r.Code))
	switch {
	case reason == qualify.ReasonTimeout:
		line += " (no final response within " + asterisk.Seconds(timeout) + ")"
	case r.Detail != "":
		line += " (" + r.Detail + ")"
	}
	return line
}
