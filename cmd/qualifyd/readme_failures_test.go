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
// README's failure tables ("When qualifyd fails", and the fault table of
// "Running several nodes") is backed by at least one test and that every
// test it names exists, so that neither table can promise a behaviour
// nothing checks.
func TestREADMEFailureTableNamesRealTests(t *testing.T) {
	tests := moduleTests(t, "../..")
	tables := []struct {
		section, header string
		min             int
	}{
		{docSection(t, "docs/operations.md", "## When qualifyd fails\n", "## "), "| router ", 15},
		{docSection(t, "docs/cluster.md", "## Running several nodes\n", "## "), "| fault ", 8},
	}
	for _, tb := range tables {
		rows := tableRows(tb.section, tb.header)
		for _, line := range rows {
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
		if len(rows) < tb.min {
			t.Errorf("the table %q has %d rows; want at least %d", tb.header, len(rows), tb.min)
		}
	}
}

// tableRows returns the rows of the table of section whose header row
// starts with header, up to the first line that is not a row.
func tableRows(section, header string) []string {
	_, table, ok := strings.Cut(section, "\n"+header)
	if !ok {
		return nil
	}
	var rows []string
	for _, line := range strings.Split(table, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if !strings.HasPrefix(line, "|---") {
			rows = append(rows, line)
		}
	}
	return rows
}
