// Command qualifyd-bench measures qualifyd's engine and prober on this
// machine, in real time, and prints the figures quoted in docs/performance.md. Every figure it prints comes from one run of it.
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: qualifyd-bench engine|scale|daemon|state|cluster [options]   (see -h of each)")
		return 2
	}
	switch args[0] {
	case "engine":
		return runEngine(ctx, args[1:], stdout, stderr)
	case "scale":
		return runScale(ctx, args[1:], stdout, stderr)
	case "daemon":
		return runDaemon(ctx, args[1:], stdout, stderr)
	case "state":
		return runState(ctx, args[1:], stdout, stderr)
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "qualifyd-bench: unknown benchmark %q\n", args[0])
	return 2
}
