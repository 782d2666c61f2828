// Command qualifyd is the SIP OPTIONS qualify engine and daemon. main is
// thin: it parses the subcommand and hands over to its function.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: a one-line summary and its entry point, which
// returns the process exit code (0 ok, 1 failure, 2 usage error).
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists every subcommand by name; each lives in its own file.
func commands() map[string]command {
	return map[string]command{
		"version":      {summary: "print the version", run: runVersion},
		"simulate":     {summary: "measure false outages and detection times of each AoR's policy in virtual time", run: runSimulate},
		"check-config": {summary: "check a pjsip.conf / qualifyd configuration file", run: runCheckConfig},
		"demo":         {summary: "qualify a scripted SIP peer on loopback, Asterisk's policy beside qualifyd's", run: runDemo},
		"check":        {summary: "send one OPTIONS to a SIP URI and print the status and RTT", run: runCheck},
		"run":          {summary: "run the daemon: qualify the configured AoRs, serve the API", run: runDaemon},
		"show":         {summary: "show contacts|aors|endpoints of a running daemon, as Asterisk's pjsip show", run: runShow},
		"qualify":      {summary: "probe an AoR's contacts now through a running daemon", run: runQualify},
		"guard":        {summary: "beside Asterisk: take method=maintenance endpoints out of maintenance when qualifyd's heartbeat is stale", run: runGuard},
		"release":      {summary: "push every object of the sinks up and exit, for taking qualifyd out of service", run: runRelease},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args[0] to its subcommand.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		return runVersion(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "qualifyd: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: qualifyd COMMAND [options]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, cmds[n].summary)
	}
}
