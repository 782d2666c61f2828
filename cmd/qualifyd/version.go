package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "qualifyd", version())
	return 0
}

// version is the module version the binary was built from, or "devel".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
