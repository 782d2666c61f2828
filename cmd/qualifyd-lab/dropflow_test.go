package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// TestMain runs the dropflow helpers when the test binary is started as
// one (dropflow starts os.Executable inside its namespaces), and the
// tests otherwise.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "dropflow-") {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestDropFlowShort: behind a middlebox (nftables in a namespace) that
// silently forgets a TCP flow idle for longer than 2 s and then drops its
// packets, a probe cycle costs at most one failure, where the rules
// before the redial, measured side by side, cost two. It runs when
// QUALIFYD_LAB=1 (make lab, part of make test); then a missing privilege
// or tool is a failure, not a skip. The figure is logged (-v).
func TestDropFlowShort(t *testing.T) {
	if os.Getenv("QUALIFYD_LAB") != "1" {
		t.Skip("the real-network lab runs under make lab (QUALIFYD_LAB=1, root, nft, ip)")
	}
	t.Parallel() // beside the other lab runs: its own namespaces
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var progress, table strings.Builder
	rep, err := dropflow(context.Background(), shortDrop(), self, &progress)
	printDrop(&table, rep)
	t.Log("\n" + progress.String() + table.String())
	if err != nil {
		t.Fatalf("dropflow: %v", err)
	}
	for _, r := range rep.Rows {
		switch {
		case r.Mode == "before" && (r.total() == 0 || rep.Dropped == 0):
			t.Errorf("before: %v failures, %d packets dropped: the middlebox dropped no flow", r.Failures, rep.Dropped)
		case r.Mode == "redial" && r.worst() > 1:
			t.Errorf("redial: failures per cycle %v, want at most one", r.Failures)
		}
	}
}
