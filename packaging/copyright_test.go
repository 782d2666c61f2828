package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// paragraph is one paragraph of a Debian control-style file: its fields
// by name, a continued value's lines joined with "\n".
type paragraph map[string]string

// paragraphs splits a DEP-5 file into paragraphs; it fails the test on a
// line that is neither a field, a continuation nor a paragraph break.
func paragraphs(t *testing.T, text string) []paragraph {
	t.Helper()
	var out []paragraph
	var cur paragraph
	last := ""
	for i, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case line == "":
			cur = nil
		case line[0] == ' ' || line[0] == '\t':
			if cur == nil || last == "" {
				t.Fatalf("copyright:%d: a continuation line outside a field", i+1)
			}
			cur[last] += "\n" + strings.TrimSpace(line)
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.ContainsAny(name, " \t") {
				t.Fatalf("copyright:%d: not a field: %q", i+1, line)
			}
			if cur == nil {
				cur = paragraph{}
				out = append(out, cur)
			}
			if _, dup := cur[name]; dup {
				t.Fatalf("copyright:%d: field %s twice in a paragraph", i+1, name)
			}
			cur[name], last = strings.TrimSpace(value), name
		}
	}
	return out
}

// TestCopyrightIsDEP5: packaging/copyright, the package's
// /usr/share/doc/qualifyd/copyright, is a machine-readable copyright file
// (copyright-format 1.0): a header, Files paragraphs with a Copyright and a
// License each, and one stand-alone License paragraph with the text of
// every license they name, none unused. qualifyd's own license is the
// LICENSE file's, Apache-2.0.
func TestCopyrightIsDEP5(t *testing.T) {
	ps := paragraphs(t, string(readFile(t, "copyright")))
	if h := ps[0]; h["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" || h["Upstream-Name"] != "qualifyd" {
		t.Fatalf("header paragraph %v", h)
	}
	named, texts := map[string]bool{}, map[string]bool{}
	for _, p := range ps[1:] {
		short, text, _ := strings.Cut(p["License"], "\n")
		switch _, files := p["Files"]; {
		case files && (p["Copyright"] == "" || short == "" || text != ""):
			t.Errorf("Files paragraph %q needs a Copyright and a License short name only", p["Files"])
		case files:
			named[short] = true
		case short == "" || text == "" || texts[short]:
			t.Errorf("stand-alone License paragraph %q needs a name and a text, once", short)
		default:
			texts[short] = true
		}
	}
	for name := range named {
		if !texts[name] {
			t.Errorf("license %s is named but has no stand-alone paragraph", name)
		}
	}
	for name := range texts {
		if !named[name] {
			t.Errorf("license %s has a text but no Files paragraph names it", name)
		}
	}
	if own := ps[1]; own["Files"] != "*" || own["License"] != "Apache-2.0" {
		t.Errorf("first Files paragraph %v, want qualifyd's own: Files: *, License: Apache-2.0", own)
	}
	want := bytes.TrimLeft(readFile(t, "/usr/share/common-licenses/Apache-2.0"), "\n")
	if !bytes.Equal(readFile(t, "../LICENSE"), want) {
		t.Error("LICENSE is not the Apache License 2.0 text of /usr/share/common-licenses/Apache-2.0")
	}
}

// TestCopyrightCoversLinkedModules: packaging/copyright has a Files
// paragraph for every Go module linked into qualifyd, and none for a
// module that is not.
func TestCopyrightCoversLinkedModules(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if .Version}}{{.Path}}{{end}}{{end}}", "./cmd/qualifyd")
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var linked []string
	for _, m := range strings.Fields(string(out)) {
		if !slices.Contains(linked, m) {
			linked = append(linked, m)
		}
	}
	var listed []string
	for _, p := range paragraphs(t, string(readFile(t, "copyright")))[1:] {
		for _, f := range strings.Fields(p["Files"]) {
			if f != "*" && f != "go/*" {
				listed = append(listed, strings.TrimSuffix(f, "/*"))
			}
		}
	}
	slices.Sort(linked)
	slices.Sort(listed)
	if !slices.Equal(linked, listed) {
		t.Errorf("copyright lists the modules\n%q\nqualifyd links\n%q", listed, linked)
	}
}
