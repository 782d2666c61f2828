package metrics

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/qualifyd/qualifyd/internal/peertest"
)

// The alerting rules docs/metrics.md offers, and promtool from Debian's
// prometheus package, which make deps installs.
const (
	rulesFile     = "../../docs/prometheus/qualifyd.rules.yml"
	rulesTestFile = "../../docs/prometheus/qualifyd.rules.test.yml"
)

// promtool runs promtool with args and stdin, failing the test with its
// output unless it succeeds.
func promtool(t *testing.T, stdin []byte, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), peertest.Require(t, "promtool"), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestExpositionLint: promtool's linter finds nothing to say about the
// exposition of every series, with every option set.
func TestExpositionLint(t *testing.T) {
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range gatherAll(t) {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	promtool(t, text.Bytes(), "check", "metrics")
}

// TestAlertingRules: the rules load, and their unit tests (each alert
// fires when it should, and not before its "for") pass.
func TestAlertingRules(t *testing.T) {
	promtool(t, nil, "check", "rules", rulesFile)
	promtool(t, nil, "test", "rules", rulesTestFile)
}

// TestAlertingRulesUseDocumentedSeries: every qualifyd series the rules
// read is one docs/metrics.md documents, so that a renamed metric cannot
// leave an alert that never fires.
func TestAlertingRulesUseDocumentedSeries(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rows := readmeMetrics(t)
	names := regexp.MustCompile(`qualifyd_[a-z_]+`).FindAllString(string(rules), -1)
	if len(names) == 0 {
		t.Fatal("the rules read no qualifyd series")
	}
	for _, name := range names {
		base := strings.TrimSuffix(name, "_bucket")
		if _, ok := rows[base]; !ok {
			t.Errorf("the rules read %s, which docs/metrics.md's table does not list", name)
		}
	}
}

// TestREADMEPrometheusConfig: docs/metrics.md's prometheus.yml lines are a
// configuration promtool accepts, with its rule file in place.
func TestREADMEPrometheusConfig(t *testing.T) {
	page, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(page), "```yaml\n# prometheus.yml\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed || !strings.Contains(block, "/etc/prometheus/qualifyd.rules.yml") {
		t.Fatal("docs/metrics.md has no prometheus.yml example naming /etc/prometheus/qualifyd.rules.yml")
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(block, "/etc/prometheus/qualifyd.rules.yml", rules)), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, nil, "check", "config", conf)
}
