package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// moduleTests returns the names of every test function of the module's
// _test.go files, from the module's root.
func moduleTests(t *testing.T, root string) map[string]bool {
	t.Helper()
	def := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range def.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// testName is a test named in a row of the README's failure table.
var testName = regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")

// TestREADMEFailureTableNamesRealTests checks that every row of the
// README's "When qualifyd fails" table is backed by at least one test
// and that every test it names exists, so that the table cannot promise
// a behaviour nothing checks.
func TestREADMEFailureTableNamesRealTests(t *testing.T) {
	section := readmeSection(t, "## When qualifyd fails\n", "## ")
	tests := moduleTests(t, "../..")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| router ") {
			continue
		}
		rows++
		named := testName.FindAllStringSubmatch(line, -1)
		if len(named) == 0 {
			t.Errorf("row names no test: %s", line)
		}
		for _, m := range named {
			if !tests[m[1]] {
				t.Errorf("row names %s, which no _test.go defines: %s", m[1], line)
			}
		}
	}
	if rows < 15 {
		t.Fatalf("the table has %d rows; want one per router and fault (at least 15)", rows)
	}
}
