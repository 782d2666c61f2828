package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// buildVersion is the release version, set at link time with
// -ldflags "-X main.buildVersion=0.1.0"; empty means the module's build
// info decides.
var buildVersion string

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "qualifyd", version())
	return 0
}

// version is the binary's version: buildVersion when the link set it,
// else the module's, with the VCS revision when the build info has one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return formatVersion(buildVersion, bi)
}

// formatVersion is "VERSION" or "VERSION (REVISION)", one line: VERSION is
// linked when set, else bi's main module version ("(devel)" and none read
// "devel"); REVISION is the first 7 digits of bi's vcs.revision, with
// "+dirty" when vcs.modified says so.
func formatVersion(linked string, bi *debug.BuildInfo) string {
	v := linked
	if v == "" {
		v = bi.Main.Version
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(7, len(s.Value))]
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	if dirty {
		rev += "+dirty"
	}
	return v + " (" + rev + ")"
}
