package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintln(stdout, "qualifyd", v)
	return 0
}
