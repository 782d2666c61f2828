package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConfManPage renders qualifyd.conf(5) from the configuration
// reference and checks that every option of its tables is an entry of the
// page with the default the table gives, that no markdown is left, and
// that man formats it without a warning.
func TestConfManPage(t *testing.T) {
	md, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	page, err := confManPage(md, "0.1.0", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(page, []byte(".TH QUALIFYD.CONF 5 2026-12-01 \"qualifyd 0.1.0\"")) {
		t.Errorf("header: %.80q", page)
	}
	row := regexp.MustCompile("(?m)^\\| (`[a-z0-9_]+`[^|]*)\\|(.*)$")
	rows := row.FindAllStringSubmatch(string(md), -1)
	if len(rows) < 50 {
		t.Fatalf("%d option rows in %s, fewer than it has", len(rows), referenceFile)
	}
	for _, r := range rows {
		tag := ".TP\n" + inline(strings.TrimSpace(r[1])) + "\n"
		if !bytes.Contains(page, []byte(tag)) {
			t.Errorf("no entry %q", tag)
		}
	}
	for _, want := range []string{"\n.SH TYPE=AOR\n", "\n.SH TYPE=SINK\n", "\n.SH TYPE=CLUSTER\n", "\\fBqualify_frequency\\fR (F)\nDefault: 0.\n",
		"\\fBtimeout\\fR\nDrivers: all. Default: 5.\n", "\\fBlease_ttl\\fR\nDefault: 6.\n"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page has no %q", want)
		}
	}
	for _, md := range []string{"**", "\n## ", "\n|"} {
		if bytes.Contains(page, []byte(md)) {
			t.Errorf("markdown %q left in the page", md)
		}
	}
	if m := regexp.MustCompile(`\]\([a-z-]+\.md`).Find(page); m != nil {
		t.Errorf("a link left in the page: %s", m)
	}
	if bytes.Count(page, []byte("`")) > 0 {
		t.Errorf("a backtick left in the page")
	}
	path := filepath.Join(t.TempDir(), "qualifyd.conf.5")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("man", "--warnings", "-l", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !bytes.Contains(out, []byte("qualifyd.conf - qualifyd's configuration file")) {
		t.Fatalf("man -l: %v\n%.2000s", err, out)
	}
	if stderr.Len() > 0 {
		t.Errorf("man warns:\n%s", &stderr)
	}
}

// TestInline: code spans in bold, links as their text (not inside code),
// bold and italics, and the roff escapes.
func TestInline(t *testing.T) {
	for in, want := range map[string]string{
		"`[name](!)` and [`type=sink`](configuration.md#typesink)": `\fB[name](!)\fR and \fBtype=sink\fR`,
		"**Fail open.** a *b* c-d":                                 `\fBFail open.\fR a \fIb\fR c\-d`,
		".leading dot":                                             `\&.leading dot`,
		`a \; b`:                                                   `a \e; b`,
	} {
		if got := inline(in); got != want {
			t.Errorf("inline(%q) = %q, want %q", in, got, want)
		}
	}
}
