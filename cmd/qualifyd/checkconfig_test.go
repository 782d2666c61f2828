package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// writeConfig writes files into a fresh directory and returns its path.
func writeConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkConfig runs the command as main would, through run.
func checkConfig(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"check-config"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

const pbxConf = `[udp]
type=transport
protocol=udp

[pbx07]
type=endpoint
transport=udp
aors=pbx07
outbound_proxy=sip:edge.example\;lr

[pbx07]
type=aor
contact=sip:pbx07@192.0.2.7:5060
qualify_frequency=30

[pbx08]
type=aor
contact=sip:pbx08@192.0.2.8:5060
qualify_frequency=60
qualify_timeout=0

[phone]
type=aor
max_contacts=1
`

const overlayConf = `#include pjsip.conf
[pbx07](+type=aor)
qualify_failures=3
qualify_retry_interval=2
[pbx08](+type=aor)
qualify_retry_interval=1.5
qualify_down_interval=10
qualify_successes=2
qualify_latency_only=yes
`

func TestCheckConfigJSON(t *testing.T) {
	dir := writeConfig(t, map[string]string{"pjsip.conf": pbxConf, "qualifyd.conf": overlayConf})
	code, stdout, stderr := checkConfig("--json", filepath.Join(dir, "qualifyd.conf"))
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := `{
  "aors": [
    {
      "name": "pbx07",
      "contacts": [
        "sip:pbx07@192.0.2.7:5060"
      ],
      "qualify_frequency": 30,
      "qualify_timeout": 3,
      "qualify_failures": 3,
      "qualify_retry_interval": 2,
      "qualify_down_interval": 30,
      "qualify_down_backoff": true,
      "qualify_successes": 1,
      "qualify_2xx_only": false,
      "qualify_latency_only": false,
      "outbound_proxy": "sip:edge.example;lr"
    },
    {
      "name": "pbx08",
      "contacts": [
        "sip:pbx08@192.0.2.8:5060"
      ],
      "qualify_frequency": 60,
      "qualify_timeout": 32,
      "qualify_failures": 1,
      "qualify_retry_interval": 1.5,
      "qualify_down_interval": 10,
      "qualify_successes": 2,
      "qualify_2xx_only": false,
      "qualify_latency_only": true,
      "outbound_proxy": ""
    },
    {
      "name": "phone",
      "contacts": [],
      "qualify_frequency": 0,
      "qualify_timeout": 3,
      "qualify_failures": 1,
      "qualify_retry_interval": 0,
      "qualify_down_interval": 0,
      "qualify_successes": 1,
      "qualify_2xx_only": false,
      "qualify_latency_only": false,
      "outbound_proxy": ""
    }
  ]
}
`
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
}

// TestCheckConfigWarnings: a configuration Asterisk loads with a warning
// passes, and check-config prints the warning on stderr, the summary or
// the JSON on stdout as without one.
func TestCheckConfigWarnings(t *testing.T) {
	conf := "[acl]\ntype=acl\n[acl]\ntype=acl\n[t]\ntype=wizard\ntransport=ipv4\nremote_hosts=192.0.2.1\n"
	dir := writeConfig(t, map[string]string{"pjsip.conf": conf})
	file := filepath.Join(dir, "pjsip.conf")
	want := "qualifyd check-config: warning: " + file + `:3: section "acl": duplicate section: a second acl named "acl" (the first is at ` + file + ":1); Asterisk loads no acl of this configuration\n" +
		"qualifyd check-config: warning: " + file + `:7: section "t": option "transport": missing reference: no transport section "ipv4": probes go by the contact URI alone, as Asterisk sends them (it logs "Unable to retrieve PJSIP transport 'ipv4'")` + "\n"
	for _, args := range [][]string{{file}, {"--json", file}} {
		code, stdout, stderr := checkConfig(args...)
		if code != 0 || stderr != want {
			t.Errorf("%q: exit %d, stderr\n%s\nwant\n%s", args, code, stderr, want)
		}
		if !strings.Contains(stdout, "sip:192.0.2.1") && !strings.Contains(stdout, "1 static contacts") {
			t.Errorf("%q: stdout %q", args, stdout)
		}
	}
}

func TestCheckConfigDownFallsBackToFrequency(t *testing.T) {
	dir := writeConfig(t, map[string]string{"pjsip.conf": "[a]\ntype=aor\nqualify_frequency=20\n"})
	code, stdout, _ := checkConfig("-json", filepath.Join(dir, "pjsip.conf"))
	if code != 0 || !bytes.Contains([]byte(stdout), []byte(`"qualify_retry_interval": 20,
      "qualify_down_interval": 20,`)) {
		t.Fatalf("exit %d, stdout:\n%s", code, stdout)
	}
}

func TestCheckConfigSummary(t *testing.T) {
	dir := writeConfig(t, map[string]string{"pjsip.conf": pbxConf, "qualifyd.conf": overlayConf})
	file := filepath.Join(dir, "qualifyd.conf")
	code, stdout, stderr := checkConfig(file)
	want := file + ": OK: 3 AoRs (2 qualified), 2 static contacts, 1 endpoints\n" +
		"  pbx07  contacts=1 frequency=30s timeout=3s failures=3 retry=2s down=2s..30s successes=1 proxy=sip:edge.example;lr\n" +
		"  pbx08  contacts=1 frequency=60s timeout=32s failures=1 retry=1.5s down=10s successes=2 latency-only\n" +
		"  phone  contacts=0 qualify=off\n"
	if code != 0 || stderr != "" || stdout != want {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
}

func TestCheckConfigConfigDir(t *testing.T) {
	pbx := writeConfig(t, map[string]string{"pjsip.conf": pbxConf})
	own := writeConfig(t, map[string]string{"qualifyd.conf": overlayConf})
	file := filepath.Join(own, "qualifyd.conf")
	if code, _, stderr := checkConfig(file); code != 1 || stderr == "" {
		t.Fatalf("without --config-dir: exit %d, stderr %q; want 1 and the missing include", code, stderr)
	}
	if code, _, stderr := checkConfig("--config-dir", pbx, file); code != 0 {
		t.Fatalf("with --config-dir: exit %d, stderr %q", code, stderr)
	}
}

func TestCheckConfigErrors(t *testing.T) {
	dir := writeConfig(t, map[string]string{
		"pjsip.conf": pbxConf,
		"bad.conf":   "#include pjsip.conf\n[pbx07](+type=aor)\nqualify_failures=0\n",
		"worse.conf": "[a]\ntype=aor\nqualify_failures=0\n[b]\ntype=aor\nqualify_frequency=x\n",
	})
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStderr string
	}{
		{"invalid file", []string{filepath.Join(dir, "bad.conf")}, 1,
			"qualifyd check-config: " + filepath.Join(dir, "bad.conf") +
				`:3: section "pbx07": option "qualify_failures": invalid value: "0" is out of range: must be at least 1` + "\n"},
		{"every section's error", []string{filepath.Join(dir, "worse.conf")}, 1,
			"qualifyd check-config: " + filepath.Join(dir, "worse.conf") +
				`:3: section "a": option "qualify_failures": invalid value: "0" is out of range: must be at least 1` + "\n" +
				"qualifyd check-config: " + filepath.Join(dir, "worse.conf") +
				`:6: section "b": option "qualify_frequency": invalid value: "x" is not an unsigned integer` + "\n"},
		{"missing file", []string{filepath.Join(dir, "nope.conf")}, 1, ""},
		{"no file", nil, 2, ""},
		{"two files", []string{"a", "b"}, 2, ""},
		{"unknown flag", []string{"--yaml", "a"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := checkConfig(tt.args...)
			if code != tt.code || stdout != "" || stderr == "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, the error on stderr only", code, stdout, stderr, tt.code)
			}
			if tt.wantStderr != "" && stderr != tt.wantStderr {
				t.Errorf("stderr\n got: %q\nwant: %q", stderr, tt.wantStderr)
			}
		})
	}
}

func TestCheckConfigHelp(t *testing.T) {
	if code, _, stderr := checkConfig("-h"); code != 0 || stderr == "" {
		t.Fatalf("exit %d, stderr %q; want 0 and the usage", code, stderr)
	}
}

// TestHelpExitsZero: every command's -h prints its usage and exits 0;
// a flag it does not know exits 2.
func TestHelpExitsZero(t *testing.T) {
	for _, cmd := range []string{"run", "demo", "check", "check-config", "show", "qualify", "simulate"} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{cmd, "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "usage: qualifyd "+cmd) {
			t.Errorf("%s -h: exit %d, stderr %q", cmd, code, errOut.String())
		}
		if code := run(t.Context(), []string{cmd, "--no-such-flag"}, &out, &errOut); code != 2 {
			t.Errorf("%s --no-such-flag: exit %d, want 2", cmd, code)
		}
	}
}

// TestCheckConfigFlagsAfterFile: flags after the file are read as
// before it, as for every other command.
func TestCheckConfigFlagsAfterFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pjsip.conf")
	if err := os.WriteFile(path, []byte(pbxConf), 0o644); err != nil {
		t.Fatal(err)
	}
	code, before, _ := checkConfig("--json", path)
	code2, after, stderr := checkConfig(path, "--json")
	if code != 0 || code2 != 0 || after != before || !strings.HasPrefix(after, "{") {
		t.Fatalf("exit %d and %d, %q; stdout:\n%s\nwant:\n%s", code, code2, stderr, after, before)
	}
	if code, _, _ := checkConfig(path, "extra"); code != 2 {
		t.Fatalf("two files: exit %d, want 2", code)
	}
}

// TestCheckConfigJSONMatchesEncoder: the JSON written an AoR at a time is
// byte for byte what one json.Encoder writes for the whole document,
// escapes and empty lists included.
func TestCheckConfigJSONMatchesEncoder(t *testing.T) {
	odd := pjsip.AoR{AoR: probe.AoR{Name: "a<&>\u2028", Contacts: []string{"sip:x@[::1]:5060;q=\"1\""}, Policy: new(qualify.DefaultPolicy())}}
	plain := pjsip.AoR{AoR: probe.AoR{Name: "b", Policy: new(qualify.DefaultPolicy())}}
	for _, aors := range [][]pjsip.AoR{nil, {odd}, {odd, plain}} {
		var got, want, stderr bytes.Buffer
		if code := writeJSON(&got, &stderr, &pjsip.Config{AoRs: aors}); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		whole := struct {
			AoRs []aorJSON `json:"aors"`
		}{AoRs: []aorJSON{}}
		for _, a := range aors {
			whole.AoRs = append(whole.AoRs, effective(a))
		}
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(whole); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d AoRs:\n%s\nwant:\n%s", len(aors), got.String(), want.String())
		}
	}
}

// TestCheckConfigNilPolicy: an AoR whose Policy is nil, as probe.AoR
// allows (the zero Policy, qualify off), is reported like one, not a
// crash; the reader never makes one, other callers may.
func TestCheckConfigNilPolicy(t *testing.T) {
	cfg := &pjsip.Config{AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "a", Contacts: []string{"sip:a@192.0.2.1"}}}}}
	var out, errb bytes.Buffer
	writeSummary(&out, "x.conf", cfg)
	if !strings.Contains(out.String(), "1 AoRs (0 qualified)") {
		t.Errorf("summary: %q", out.String())
	}
	out.Reset()
	writeJSON(&out, &errb, cfg)
	if !strings.Contains(out.String(), `"name": "a"`) {
		t.Errorf("--json: %q %q", out.String(), errb.String())
	}
}

// TestCheckConfigAsteriskSamples: the shapes of Asterisk's sample files,
// every example enabled, pass check-config with every AoR and with the
// warnings Asterisk's own complaints correspond to (the reader's golden
// trees).
func TestCheckConfigAsteriskSamples(t *testing.T) {
	for _, c := range []struct {
		file, summary string
		warnings      int
	}{
		{"asterisk-sample/pjsip.conf", "OK: 4 AoRs (0 qualified), 3 static contacts, 4 endpoints", 7},
		{"asterisk-wizard/qualifyd.conf", "OK: 2 AoRs (1 qualified), 2 static contacts, 2 endpoints", 2},
	} {
		file := filepath.Join("..", "..", "internal", "pjsip", "testdata", "golden", c.file)
		code, stdout, stderr := checkConfig(file)
		if code != 0 || !strings.Contains(stdout, c.summary) || strings.Count(stderr, "qualifyd check-config: warning: ") != c.warnings {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", c.file, code, stdout, stderr)
		}
	}
}

// TestCheckConfigDetectionOptions checks that the summary and --json show qualify_failures=auto
// with its range and target, the window and the success codes (qualify-semantics §2).
func TestCheckConfigDetectionOptions(t *testing.T) {
	dir := writeConfig(t, map[string]string{"pjsip.conf": "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\nqualify_frequency=30\nqualify_retry_interval=2\n" +
		"qualify_failures=auto\nqualify_failure_window=20\nqualify_success_codes=200-299,404\n"})
	file := filepath.Join(dir, "pjsip.conf")
	code, stdout, _ := checkConfig(file)
	want := file + ": OK: 1 AoRs (1 qualified), 1 static contacts, 0 endpoints\n" +
		"  a  contacts=1 frequency=30s timeout=3s failures=auto(1..8,0.01/day) retry=2s down=2s..30s successes=1 window=20s success-codes=200-299,404\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s", code, stdout, want)
	}
	code, stdout, _ = checkConfig("-json", file)
	if code != 0 || !strings.Contains(stdout, `"qualify_failures_auto": true,
      "qualify_failures_min": 1,
      "qualify_failures_max": 8,
      "qualify_false_outages_per_day": 0.01,
      "qualify_failure_window": 20,
      "qualify_success_codes": "200-299,404"`) {
		t.Fatalf("exit %d, stdout:\n%s", code, stdout)
	}
}

// TestCheckConfigCallOptions checks that the summary and --json show the
// options of calls as evidence when set (qualify-semantics §11).
func TestCheckConfigCallOptions(t *testing.T) {
	dir := writeConfig(t, map[string]string{"qualifyd.conf": "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\nqualify_frequency=30\n" +
		"qualify_quiet_only=yes\nqualify_call_failure_codes=500-503\nqualify_drain_max=60\n"})
	file := filepath.Join(dir, "qualifyd.conf")
	code, stdout, _ := checkConfig(file)
	want := file + ": OK: 1 AoRs (1 qualified), 1 static contacts, 0 endpoints\n" +
		"  a  contacts=1 frequency=30s timeout=3s failures=1 retry=30s down=30s successes=1 quiet-only call-failure-codes=500-503 drain-max=60s\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s", code, stdout, want)
	}
	code, stdout, _ = checkConfig("-json", file)
	if code != 0 || !strings.Contains(stdout, `"qualify_quiet_only": true,
      "qualify_call_failure_codes": "500-503",
      "qualify_drain_max": 60`) {
		t.Fatalf("exit %d, stdout:\n%s", code, stdout)
	}
}

// TestCheckConfigNotAsterisk checks the warning for a pjsip.conf that an
// unpatched Asterisk would read too: the AoR that sets the options of
// contrib/asterisk's patches loads, with a warning naming them.
func TestCheckConfigNotAsterisk(t *testing.T) {
	conf := "[pbx07]\ntype=aor\ncontact=sip:pbx07@192.0.2.7\nqualify_frequency=30\nqualify_failures=3\nqualify_retry_interval=2\n"
	dir := writeConfig(t, map[string]string{"pjsip.conf": conf})
	file := filepath.Join(dir, "pjsip.conf")
	want := "qualifyd check-config: warning: " + file + `:5: section "pbx07": option "qualify_failures": not an Asterisk option: ` +
		"Asterisk refuses to load an AoR that sets qualify_failures, qualify_retry_interval unless it has contrib/asterisk's qualify patches\n"
	code, stdout, stderr := checkConfig(file)
	if code != 0 || stderr != want || !strings.Contains(stdout, "OK: 1 AoRs") {
		t.Errorf("exit %d, stdout\n%s\nstderr\n%s\nwant\n%s", code, stdout, stderr, want)
	}
}
