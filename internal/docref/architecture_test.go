package docref

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the import path prefix of this repository's packages.
const module = "github.com/qualifyd/qualifyd/"

var (
	entry    = regexp.MustCompile("(?m)^\\*\\*`((?:internal|cmd)/[a-z-]+)`\\*\\*")
	backtick = regexp.MustCompile("`([a-z/-]+)`")
)

// treePackages returns the module's packages under internal/ and cmd/,
// by path from the root ("internal/qualify"), each with the packages of
// ours its non-test files import (by name under internal/).
func treePackages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, top := range []string{"internal", "cmd"} {
		dirs, err := os.ReadDir(filepath.Join(root, top))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if d.IsDir() {
				if imports, ok := packageImports(t, filepath.Join(root, top, d.Name())); ok {
					out[top+"/"+d.Name()] = imports
				}
			}
		}
	}
	return out
}

// packageImports returns the internal packages the non-test files of dir
// import; ok is false when dir holds no Go file.
func packageImports(t *testing.T, dir string) (imports []string, ok bool) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		ok = true
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range ast.Imports {
			if p, found := strings.CutPrefix(strings.Trim(im.Path.Value, `"`), module+"internal/"); found && !slices.Contains(imports, p) {
				imports = append(imports, p)
			}
		}
	}
	return imports, ok
}

// importTable reads architecture.md's "may import (of ours)" table: for
// each package named in a row's first cell, the packages its second cell
// names (none for "nothing"), or nil for a row allowing "every" package
// or "anything".
func importTable(t *testing.T, page string) map[string][]string {
	t.Helper()
	_, table, ok := strings.Cut(page, "| package | may import (of ours) |")
	if !ok {
		t.Fatal("docs/architecture.md has no import table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	out := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(cells[1], "---") {
			continue
		}
		may := []string{}
		for _, m := range backtick.FindAllStringSubmatch(cells[2], -1) {
			may = append(may, m[1])
		}
		if strings.Contains(cells[2], "every") || strings.Contains(cells[2], "anything") {
			may = nil
		}
		for _, m := range backtick.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = may
		}
	}
	return out
}

// TestArchitectureMatchesTheTree holds docs/architecture.md to the
// packages: an entry for every package of internal/ and cmd/ and none for
// a package that is gone, a row of the import table for every internal
// package, and no import of ours its row does not allow.
func TestArchitectureMatchesTheTree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	page, tree := string(b), treePackages(t)
	documented := map[string]bool{}
	for _, m := range entry.FindAllStringSubmatch(page, -1) {
		documented[m[1]] = true
		if _, ok := tree[m[1]]; !ok {
			t.Errorf("docs/architecture.md describes %s, which is not in the tree", m[1])
		}
	}
	table := importTable(t, page)
	for pkg, imports := range tree {
		if !documented[pkg] {
			t.Errorf("docs/architecture.md has no entry for %s", pkg)
		}
		name, internal := strings.CutPrefix(pkg, "internal/")
		may, listed := table[name]
		if internal && !listed {
			t.Errorf("docs/architecture.md's import table has no row for %s", name)
		}
		for _, im := range imports {
			if listed && may != nil && !slices.Contains(may, im) {
				t.Errorf("%s imports internal/%s, which docs/architecture.md's import table does not allow it", pkg, im)
			}
		}
	}
}
