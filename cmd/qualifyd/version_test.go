package main

import (
	"bytes"
	"os/exec"
	"regexp"
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "a840019f00d1e2"}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: "a840019f00d1e2"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		linked, module string
		settings       []debug.BuildSetting
		want           string
	}{
		{"0.1.0", "(devel)", rev, "0.1.0 (a840019)"},
		{"0.1.0", "v0.2.0", nil, "0.1.0"},
		{"", "v0.2.0", nil, "v0.2.0"},
		{"", "(devel)", rev, "devel (a840019)"},
		{"", "(devel)", dirty, "devel (a840019+dirty)"},
		{"", "", nil, "devel"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.module}, Settings: tc.settings}
		if got := formatVersion(tc.linked, bi); got != tc.want {
			t.Errorf("formatVersion(%q, %q, %v) = %q, want %q", tc.linked, tc.module, tc.settings, got, tc.want)
		}
	}
}

// TestVersionCommand: without -ldflags the binary (built by TestMain)
// prints its build info's version, the same for --version and version.
func TestVersionCommand(t *testing.T) {
	var outs [2][]byte
	for i, arg := range []string{"--version", "version"} {
		out, err := exec.Command(binary, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		outs[i] = out
	}
	if !bytes.Equal(outs[0], outs[1]) || !regexp.MustCompile(`^qualifyd (devel|v\S+)( \([0-9a-f]{1,7}(\+dirty)?\))?\n$`).Match(outs[0]) {
		t.Fatalf("--version %q, version %q", outs[0], outs[1])
	}
}
