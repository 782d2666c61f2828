package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const trunksConf = "testdata/simulate/trunks.conf"

// simulateCmd runs "qualifyd simulate args..." as main would.
func simulateCmd(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"simulate"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/simulate/name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "simulate", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestSimulateGolden(t *testing.T) {
	cases := map[string][]string{
		"probe-loss.txt":   {"--probe-loss", "0.05", "--days", "30", "--trials", "100", "--seed", "3", trunksConf},
		"packet-loss.json": {trunksConf, "--packet-loss", "0.2", "--burst", "5", "--days", "10", "--trials", "50", "--json"},
		"recommend.txt":    {"--recommend", "--probe-loss", "0.05", "--detect-within", "45", "--max-probes-per-hour", "300", "--days", "30", "--trials", "100"},
		// The policies of README's detection table, briefly: auto and the
		// window against the request's policy under 10 s bursts.
		"detection.txt": {"--probe-loss", "0.05", "--burst", "10", "--days", "30", "--trials", "100", "testdata/simulate/detection.conf"},
		// Calls as evidence (qualify-semantics §11): a call every 5 s seen
		// failing after 2 s, and what qualify_quiet_only saves.
		"calls.txt": {"--call-interval", "5", "--call-timeout", "2", "--probe-loss", "0.01", "--days", "10", "--trials", "100", "--seed", "3", trunksConf},
		// auto proposed at 1% loss, and the window it needs under bursts.
		"recommend-burst.txt": {"--recommend", "--probe-loss", "0.01", "--detect-within", "45", "--burst", "10", "--days", "30", "--trials", "100"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := simulateCmd(args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden(t, name, stdout)
		})
	}
}

func TestSimulateJSONShape(t *testing.T) {
	code, stdout, stderr := simulateCmd("--json", "--days", "2", "--trials", "10", trunksConf)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var out struct {
		AoRs []map[string]any `json:"aors"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	fields := []string{"name", "probes_per_hour_healthy", "probes_per_hour_dead", "false_outages_per_day",
		"mean_false_outage_seconds", "unavailable_fraction", "detection_worst_seconds", "detection_mean_seconds"}
	if len(out.AoRs) != 3 {
		t.Fatalf("%d AoRs, want the 3 qualified ones", len(out.AoRs))
	}
	for _, f := range fields {
		if _, ok := out.AoRs[0][f]; !ok {
			t.Errorf("field %q missing from %v", f, out.AoRs[0])
		}
	}
	if !strings.Contains(stderr, `AoR "phone": qualify is off, skipped`) {
		t.Errorf("stderr %q does not note the unqualified AoR", stderr)
	}
}

func TestSimulateErrors(t *testing.T) {
	dir := t.TempDir()
	off := filepath.Join(dir, "off.conf")
	if err := os.WriteFile(off, []byte("[phone]\ntype=aor\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "FILE is required"},
		{[]string{"a.conf", "b.conf"}, 2, "one FILE"},
		{[]string{"--probe-loss", "0.1", "--packet-loss", "0.1", trunksConf}, 2, "exclusive"},
		{[]string{"--frobnicate", trunksConf}, 2, "flag provided but not defined"},
		{[]string{"--recommend", "--probe-loss", "0.1"}, 2, "needs --probe-loss and --detect-within"},
		{[]string{"--recommend", "--probe-loss", "0.1", "--detect-within", "40", "--json"}, 2, "neither"},
		{[]string{"--detect-within", "40", trunksConf}, 2, "need --recommend"},
		{[]string{"--call-timeout", "2", trunksConf}, 2, "--call-timeout needs --call-interval"},
		{[]string{"--recommend", "--probe-loss", "0.1", "--detect-within", "40", "--call-interval", "5"}, 2, "takes no --call-interval"},
		{[]string{"--call-interval", "-1", trunksConf}, 1, "--call-interval -1"},
		{[]string{"--call-interval", "5", "--call-timeout", "-2", trunksConf}, 1, "--call-timeout -2"},
		{[]string{"--probe-loss", "1.5", trunksConf}, 1, "probe loss 1.5 is not in [0, 1]"},
		{[]string{"--packet-loss", "-0.1", trunksConf}, 1, "packet loss -0.1 is not in [0, 1]"},
		{[]string{"--probe-loss", "NaN", trunksConf}, 1, "not in [0, 1]"},
		{[]string{"--burst", "-1", trunksConf}, 1, "--burst -1"},
		{[]string{"--days", "0", trunksConf}, 1, "--days 0"},
		{[]string{"--trials", "0", trunksConf}, 1, "--trials 0"},
		{[]string{"--recommend", "--probe-loss", "1", "--detect-within", "40"}, 1, "below 1"},
		{[]string{"--recommend", "--probe-loss", "0.1", "--detect-within", "2"}, 1, "no setting meets the bounds"},
		{[]string{filepath.Join(dir, "missing.conf")}, 1, "missing.conf"},
		{[]string{off}, 1, "no AoR with qualify_frequency > 0"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := simulateCmd(c.args...)
			if code != c.code || stdout != "" || !strings.Contains(stderr, c.msg) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, c.code, c.msg)
			}
		})
	}
}

func TestSimulateHelp(t *testing.T) {
	code, stdout, stderr := simulateCmd("--help")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "usage: qualifyd simulate") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
