package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// TestREADMESinkExamples checks that docs/routers.md's sink examples are
// the files in testdata/sinks and testdata/kamailio (and the README's
// first quick start the dial plan), and that the qualifyd example reads:
// the PBX's AoR qualified by qualifyd, the three sinks.
func TestREADMESinkExamples(t *testing.T) {
	routers := docText(t, "docs/routers.md")
	for _, f := range []struct{ page, file string }{
		{"docs/routers.md", "sinks/qualifyd.conf"}, {"docs/routers.md", "sinks/manager.conf"},
		{"docs/routers.md", "sinks/extensions.conf"}, {"docs/routers.md", "kamailio/dispatcher.list"},
		{"README.md", "sinks/extensions.conf"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(docText(t, f.page), "```\n"+string(b)+"```\n") {
			t.Errorf("%s does not show testdata/%s as it is", f.page, f.file)
		}
	}
	kam, err := os.ReadFile(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	excerptInFile(t, routers, "The lines qualifyd needs", "jsonrpc_dispatch();", string(kam))
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

// excerptInFile checks that every line of the page's first code block
// after marker, which must contain must, is a line of the kamailio.cfg
// text kam.
func excerptInFile(t *testing.T, page, marker, must, kam string) {
	t.Helper()
	_, excerpt, _ := strings.Cut(page, marker)
	_, excerpt, _ = strings.Cut(excerpt, "```\n")
	excerpt, _, _ = strings.Cut(excerpt, "```\n")
	if !strings.Contains(excerpt, must) {
		t.Fatalf("no kamailio.cfg excerpt after %q in the page", marker)
	}
	for _, line := range strings.Split(strings.TrimSpace(excerpt), "\n") {
		if !strings.Contains("\n"+kam, "\n"+line+"\n") {
			t.Errorf("the page's kamailio.cfg line %q is not in testdata/kamailio/kamailio.cfg", line)
		}
	}
}
