package main

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCommandList(t *testing.T) {
	text := "usage: qualifyd COMMAND [options]\n\ncommands:\n  check          send one OPTIONS\n  check-config   check a file\n"
	got, err := parseCommandList(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []command{{Name: "check", Summary: "send one OPTIONS"}, {Name: "check-config", Summary: "check a file"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseCommandList = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"usage: qualifyd COMMAND\n", "usage\n\ncommands:\n\n"} {
		if _, err := parseCommandList(bad); err == nil {
			t.Errorf("parseCommandList(%q): no error", bad)
		}
	}
}

// TestParseHelp feeds the forms flag.PrintDefaults and the commands' usage
// functions print.
func TestParseHelp(t *testing.T) {
	text := "usage: qualifyd simulate [--json] FILE\n" +
		"       qualifyd simulate --recommend [FILE]\n" +
		"Usage of simulate:\n" +
		"  -burst float\n    \tmean loss burst in seconds:\n    \ta Gilbert-Elliott channel\n" +
		"  -json\n    \tprint JSON\n" +
		"  -x\tone-letter flag (default 1)\n" +
		"Reads FILE.\n"
	c := command{Name: "simulate"}
	parseHelp(&c, text)
	want := command{
		Name:  "simulate",
		Usage: []string{"qualifyd simulate [--json] FILE", "qualifyd simulate --recommend [FILE]"},
		Flags: []flagHelp{
			{Name: "burst", Arg: "float", Desc: "mean loss burst in seconds: a Gilbert-Elliott channel"},
			{Name: "json", Desc: "print JSON"},
			{Name: "x", Desc: "one-letter flag (default 1)"},
		},
		Text: []string{"Reads FILE."},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("parseHelp =\n%+v\nwant\n%+v", c, want)
	}
}

func TestRoff(t *testing.T) {
	for in, want := range map[string]string{
		"--http ADDR":     `\-\-http ADDR`,
		`a\b`:             `a\eb`,
		".config":         `\&.config`,
		"'quoted' -x":     `\&'quoted' \-x`,
		"plain text, ok.": "plain text, ok.",
	} {
		if got := roff(in); got != want {
			t.Errorf("roff(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestManPageCommand(t *testing.T) {
	cmds := []command{
		{Name: "check", Summary: "probe a URI", Usage: []string{"qualifyd check URI"},
			Flags: []flagHelp{{Name: "timeout", Arg: "float", Desc: "seconds (default 3)"}, {Name: "2xx-only", Desc: "only 2xx"}}},
		{Name: "version", Summary: "print the version"},
	}
	page := string(manPage(cmds, "0.1.0", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	for _, want := range []string{
		`.TH QUALIFYD 8 2026-12-01 "qualifyd 0.1.0" "System Administration"` + "\n",
		".SS check\nprobe a URI\n.PP\n.nf\nqualifyd check URI\n.fi\n" +
			".TP\n\\fB\\-\\-timeout\\fR \\fIfloat\\fR\nseconds (default 3)\n" +
			".TP\n\\fB\\-\\-2xx\\-only\\fR\nonly 2xx\n",
		".SS version\nprint the version\n.PP\n.nf\nqualifyd version\n.fi\n.SH FILES\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks\n%s\npage:\n%s", want, page)
		}
	}
}

// TestHelpOfQualifyd reads the help of a fresh build of qualifyd: every
// command but version has a usage line and flags, each flag a
// description, and no help line is left unread.
func TestHelpOfQualifyd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qualifyd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/qualifyd")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build qualifyd: %v\n%s", err, out)
	}
	cmds, err := helpOf(bin)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range cmds {
		names[c.Name] = true
		if noFlags[c.Name] {
			continue
		}
		if len(c.Usage) == 0 || !strings.HasPrefix(c.Usage[0], "qualifyd "+c.Name) || len(c.Flags) == 0 || len(c.Text) > 0 {
			t.Errorf("%s -h read as %+v: want a usage line, flags and nothing else", c.Name, c)
		}
		for _, f := range c.Flags {
			if f.Desc == "" {
				t.Errorf("%s --%s: no description", c.Name, f.Name)
			}
		}
	}
	for _, want := range []string{"run", "check-config", "version"} {
		if !names[want] {
			t.Errorf("no command %q in %v", want, names)
		}
	}
}
