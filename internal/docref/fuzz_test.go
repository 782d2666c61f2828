package docref

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fuzzFunc is the declaration of a fuzz target in a _test.go file.
var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)

// fuzzTargets returns every fuzz target of the repository under root, as
// "package-dir target" (the directory relative to root, slash-separated).
func fuzzTargets(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(src), -1) {
			out = append(out, path.Clean(filepath.ToSlash(rel))+" "+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// fuzzRow is a row of the testing page's fuzz table: | `pkg` | A, B | input |.
var fuzzRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\|")

// TestFuzzTableListsEveryTarget: docs/testing.md's table of fuzz targets
// names each target `go test -list '^Fuzz'` finds (what `make fuzz` runs),
// under its package, and no target that is gone.
func TestFuzzTableListsEveryTarget(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range fuzzRow.FindAllStringSubmatch(string(page), -1) {
		for _, name := range strings.Split(m[2], ",") {
			if name = strings.TrimSpace(name); strings.HasPrefix(name, "Fuzz") {
				listed = append(listed, m[1]+" "+name)
			}
		}
	}
	slices.Sort(listed)
	if want := fuzzTargets(t); !slices.Equal(listed, want) {
		t.Errorf("docs/testing.md's fuzz table lists\n%s\nthe repository has\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
}
