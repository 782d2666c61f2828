package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// helpFlags runs `qualifyd CMD -h` and returns its flags, each with the
// default -h prints ("" when it prints none).
func helpFlags(t *testing.T, cmd string) map[string]string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{cmd, "-h"}, &stdout, &stderr)
	flags := map[string]string{}
	name := ""
	for _, line := range strings.Split(stderr.String(), "\n") {
		if m := regexp.MustCompile(`^  -([a-z0-9-]+)`).FindStringSubmatch(line); m != nil {
			name = m[1]
			flags[name] = ""
		}
		if m := regexp.MustCompile(`\(default "?([^")]*)"?\)$`).FindStringSubmatch(line); m != nil && name != "" {
			flags[name] = m[1]
		}
	}
	if len(flags) == 0 {
		t.Fatalf("qualifyd %s -h printed no flags: %q", cmd, stderr.String())
	}
	return flags
}

// docText returns the text of page, a path from the repository's root
// (README.md, docs/routers.md).
func docText(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docSection returns page's text from the line starting with from to the
// next line starting with to (to the end when there is none).
func docSection(t *testing.T, page, from, to string) string {
	t.Helper()
	_, s, ok := strings.Cut("\n"+docText(t, page), "\n"+from)
	if !ok {
		t.Fatalf("%s has no %q", page, from)
	}
	s, _, _ = strings.Cut(s, "\n"+to)
	return s
}

// TestREADMERunFlags checks that docs/commands.md's table of `qualifyd run`'s
// flags lists exactly the flags of `qualifyd run -h`, each with the
// default -h prints.
func TestREADMERunFlags(t *testing.T) {
	checkFlagsTable(t, "run", docSection(t, "docs/commands.md", "Flags of `qualifyd run`:", "Flags of `qualifyd guard`:"))
}

// TestREADMEGuardFlags is TestREADMERunFlags for `qualifyd guard`.
func TestREADMEGuardFlags(t *testing.T) {
	checkFlagsTable(t, "guard", docSection(t, "docs/commands.md", "Flags of `qualifyd guard`:", "Flags of the others"))
}

// checkFlagsTable checks that docs/commands.md's table of cmd's flags lists
// exactly the flags of `qualifyd cmd -h`, each with the default -h
// prints.
func checkFlagsTable(t *testing.T, cmd, table string) {
	t.Helper()
	flags := helpFlags(t, cmd)
	rows := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)[^`]*` \\| ([^|]*) \\|").FindAllStringSubmatch(table, -1)
	documented := map[string]bool{}
	for _, r := range rows {
		name, def := r[1], strings.Trim(strings.TrimSpace(r[2]), "`")
		documented[name] = true
		want, ok := flags[name]
		switch {
		case !ok:
			t.Errorf("docs/commands.md documents --%s, which qualifyd %s does not have", name, cmd)
		case want != "" && def != want:
			t.Errorf("--%s: docs/commands.md's default is %q, -h says %q", name, def, want)
		}
	}
	for name := range flags {
		if !documented[name] {
			t.Errorf("--%s of qualifyd %s is not in docs/commands.md's table", name, cmd)
		}
	}
}

// TestREADMECommandFlags checks that every flag of the other commands is
// named in docs/commands.md or docs/simulate.md, where they are
// described, with the default -h prints, and that those pages name no
// flag they do not have.
func TestREADMECommandFlags(t *testing.T) {
	commandsText := docText(t, "docs/commands.md")
	_, others, _ := strings.Cut(commandsText, "\nFlags of the others")
	simulateText := docSection(t, "docs/simulate.md", "# Choosing settings", "## On a real lossy network")
	_, simulateFlags, ok := strings.Cut(simulateText, "`simulate` flags:")
	if !ok {
		t.Fatal("docs/simulate.md has no \"`simulate` flags:\"")
	}
	known := map[string]bool{}
	for cmd, text := range map[string]string{"check": commandsText, "check-config": commandsText,
		"demo": commandsText, "show": commandsText, "qualify": commandsText, "release": commandsText, "simulate": simulateFlags} {
		for name, def := range helpFlags(t, cmd) {
			known[name] = true
			if !regexp.MustCompile(`--` + name + `([^a-z0-9-]|$)`).MatchString(text) {
				t.Errorf("qualifyd %s --%s is not in docs/commands.md or docs/simulate.md", cmd, name)
			}
			if def != "" && !strings.Contains(text, def) {
				t.Errorf("qualifyd %s --%s: its default %q is not in docs/commands.md or docs/simulate.md", cmd, name, def)
			}
		}
	}
	for _, text := range []string{others, simulateFlags} {
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)").FindAllStringSubmatch(text, -1) {
			if !known[m[1]] {
				t.Errorf("the docs name --%s, which none of the commands has", m[1])
			}
		}
	}
}

// TestREADMEKamailioExample checks that the configuration for running
// beside Kamailio (docs/routers.md, and the README's quick start) reads as
// it says: one AoR qualified every 30 s,
// three failures with a 2 s retry.
func TestREADMEKamailioExample(t *testing.T) {
	for _, s := range []struct{ page, from, to string }{
		{"docs/routers.md", "## Running beside Kamailio", "## Make routing follow qualifyd"},
		{"README.md", "## Quick start 2: Kamailio's dispatcher", "## Quick start 3"},
	} {
		t.Run(s.page, func(t *testing.T) { checkKamailioExample(t, s.page, docSection(t, s.page, s.from, s.to)) })
	}
}

// checkKamailioExample checks the [gw1] example of section, in page.
func checkKamailioExample(t *testing.T, page, section string) {
	_, src, ok := strings.Cut(section, "```\n[gw1]\n")
	if !ok {
		t.Fatalf("no [gw1] example in %s", page)
	}
	src, _, _ = strings.Cut("[gw1]\n"+src, "```\n")
	cfg, err := pjsip.Parse("gw1.conf", []byte(src), pjsip.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AoRs) != 1 {
		t.Fatalf("%d AoRs, want 1", len(cfg.AoRs))
	}
	p := cfg.AoRs[0].PolicyValue()
	r := p.Report()
	if r.Frequency != 30 || r.Failures != 3 || r.RetryInterval != 2 || len(cfg.AoRs[0].Contacts) != 1 {
		t.Fatalf("policy %+v, contacts %q", r, cfg.AoRs[0].Contacts)
	}
}
