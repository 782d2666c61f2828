// Command qualifyd-lab runs qualifyd against real peers on a real, impaired
// network path and prints what it measured. Its one experiment,
// lossy, builds two network namespaces joined by a veth pair, makes
// nftables drop a share of the SIP packets, answers OPTIONS with SIPp, and
// probes that peer side by side with qualifyd (Asterisk's policy and a
// three-failure policy) and Kamailio's dispatcher. It needs root, iproute2,
// nftables, sipp and kamailio, and touches nothing outside the namespaces it
// creates. dropflow measures the failures a TCP flow that a middlebox
// silently forgets costs each probe cycle, with the stream rules before
// the redial and now; it needs root, iproute2 and nftables.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to the experiment named by args[0] and returns the exit
// code: 0 done, 1 failed, 2 usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: qualifyd-lab lossy|blip|dropflow [options]   (see lossy -h, blip -h, dropflow -h)")
		return 2
	}
	switch args[0] {
	case "lossy":
		return runLossy(ctx, args[1:], stdout, stderr)
	case "blip":
		return runBlipLab(ctx, args[1:], stdout, stderr)
	case "dropflow":
		return runDropflow(ctx, args[1:], stdout, stderr)
	case "dropflow-peer":
		return runDropPeer(ctx, args[1:], stderr)
	case "dropflow-prober":
		return runDropProbers(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "qualifyd-lab: unknown experiment %q\n", args[0])
	return 2
}
