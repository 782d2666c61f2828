package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// TestREADMESinkExamples checks that the README's sink examples are the
// files in testdata/sinks and testdata/kamailio, and that the qualifyd
// example reads: the PBX's AoR qualified by qualifyd, the three sinks.
func TestREADMESinkExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sinks/qualifyd.conf", "sinks/manager.conf", "sinks/extensions.conf", "kamailio/dispatcher.list"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```\n"+string(b)+"```\n") {
			t.Errorf("the README does not show testdata/%s as it is", f)
		}
	}
	kam, err := os.ReadFile(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	excerptInFile(t, string(readme), "The lines qualifyd needs", "jsonrpc_dispatch();", string(kam))
	dir := filepath.Join("testdata", "sinks")
	src, err := os.ReadFile(filepath.Join(dir, "qualifyd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The example's secret files are absolute; read them from testdata.
	src = []byte(strings.ReplaceAll(string(src), "/etc/qualifyd/", ""))
	cfg, err := pjsip.Parse(filepath.Join(dir, "qualifyd.conf"), src, pjsip.Options{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 3 || cfg.AoRs[0].PolicyValue().Frequency.Seconds() != 30 {
		t.Fatalf("%d sinks, frequency %v", len(cfg.Sinks), cfg.AoRs[0].PolicyValue().Frequency)
	}
}

// excerptInFile checks that every line of the README's first code block
// after marker, which must contain must, is a line of the kamailio.cfg
// text kam.
func excerptInFile(t *testing.T, readme, marker, must, kam string) {
	t.Helper()
	_, excerpt, _ := strings.Cut(readme, marker)
	_, excerpt, _ = strings.Cut(excerpt, "```\n")
	excerpt, _, _ = strings.Cut(excerpt, "```\n")
	if !strings.Contains(excerpt, must) {
		t.Fatalf("no kamailio.cfg excerpt after %q in the README", marker)
	}
	for _, line := range strings.Split(strings.TrimSpace(excerpt), "\n") {
		if !strings.Contains("\n"+kam, "\n"+line+"\n") {
			t.Errorf("the README's kamailio.cfg line %q is not in testdata/kamailio/kamailio.cfg", line)
		}
	}
}
