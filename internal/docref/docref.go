// Package docref reads the tables of the operator's pages in docs/, so
// that tests can hold the pages to the code: the configuration reference's
// options with their defaults, and any other table a page keeps.
package docref

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Row is one row of an option table: the options its first cell names (in
// backticks), and every cell, trimmed, by the header's column name.
type Row struct {
	Options []string
	Cells   map[string]string
}

// optionName is an option in a table's first cell: `name`.
var optionName = regexp.MustCompile("`([a-z0-9_]+)`")

// Section returns the text of page from the line that is heading to the
// next heading of the same or a higher level (the page's end when there is
// none).
func Section(page, heading string) (string, error) {
	b, err := os.ReadFile(page)
	if err != nil {
		return "", err
	}
	level := heading[:strings.IndexByte(heading, ' ')+1]
	_, s, ok := strings.Cut("\n"+string(b), "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("%s: no heading %q", page, heading)
	}
	for h := "#"; len(h) < len(level); h += "#" {
		s, _, _ = strings.Cut(s, "\n"+h+" ")
	}
	s, _, _ = strings.Cut(s, "\n"+level)
	return s, nil
}

// Options returns the rows of the first table in the section heading of
// page whose first column is "option".
func Options(page, heading string) ([]Row, error) {
	s, err := Section(page, heading)
	if err != nil {
		return nil, err
	}
	var header []string
	var rows []Row
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "|") {
			if header != nil {
				break
			}
			continue
		}
		cells := cells(line)
		switch {
		case header == nil && len(cells) > 0 && cells[0] == "option":
			header = cells
		case header == nil, strings.HasPrefix(line, "|---"):
		default:
			r := Row{Cells: map[string]string{}}
			for i, c := range cells {
				if i < len(header) {
					r.Cells[header[i]] = c
				}
			}
			for _, m := range optionName.FindAllStringSubmatch(cells[0], -1) {
				r.Options = append(r.Options, m[1])
			}
			rows = append(rows, r)
		}
	}
	if header == nil {
		return nil, fmt.Errorf("%s: %q has no table of options", page, heading)
	}
	return rows, nil
}

// cells splits a table line into its trimmed cells. A table cell never
// holds a "|" in these pages but inside backticks, as `a\|b`.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var out []string
	for _, c := range strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|") {
		out = append(out, strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|"))
	}
	return out
}

// Default returns the default a row documents for its i-th option: the
// row's "default" cell, or its i-th comma-separated part when the row
// names several options and the cell as many values, without backticks.
func (r Row) Default(i int) string {
	d := r.Cells["default"]
	if parts := strings.Split(d, ", "); len(r.Options) > 1 && len(parts) == len(r.Options) {
		d = parts[i]
	}
	return strings.ReplaceAll(d, "`", "")
}

// Required stands for a default the reference gives as "(required)".
type Required struct{}

// Every stands for a list whose default is all of them ("every AoR with
// qualify on", "every set").
type Every struct{}

// checkDefault checks that documented, a default as the page writes
// it, is value, the default the reader gives.
func checkDefault(t *testing.T, where, documented string, value any) {
	t.Helper()
	word, _, _ := strings.Cut(documented, " ")
	switch v := value.(type) {
	case Required:
		if !strings.HasPrefix(documented, "(required") {
			t.Errorf("%s: the reader requires it, the page gives the default %q", where, documented)
		}
	case Every:
		if !strings.HasPrefix(documented, "every") {
			t.Errorf("%s: the default is every one, the page says %q", where, documented)
		}
	case bool:
		if want := map[bool]string{false: "no", true: "yes"}[v]; word != want {
			t.Errorf("%s: the default is %s, the page says %q", where, want, documented)
		}
	case string:
		if v == "" {
			if !slices.Contains([]string{"", "unset", "none", "empty"}, word) {
				t.Errorf("%s: the default is empty, the page says %q", where, documented)
			}
		} else if word != v {
			t.Errorf("%s: the default is %q, the page says %q", where, v, documented)
		}
	case float64:
		if f, err := strconv.ParseFloat(word, 64); err != nil || f != v {
			t.Errorf("%s: the default is %v, the page says %q", where, v, documented)
		}
	default:
		t.Fatalf("%s: no way to compare %T", where, value)
	}
}

// CheckTable checks that page's option table under heading lists
// exactly the options of want, each with its default. drivers, when not
// nil, gives the drivers that accept each option, which the table's
// "drivers" column must name ("all" for every one, nothing for none).
func CheckTable(t *testing.T, page, heading string, want map[string]any, drivers map[string][]string) {
	t.Helper()
	rows, err := Options(page, heading)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, r := range rows {
		for i, o := range r.Options {
			where := heading + ": " + o
			if documented[o] {
				t.Errorf("%s: documented twice", where)
			}
			documented[o] = true
			v, ok := want[o]
			if !ok {
				t.Errorf("%s: the page documents an option the reader does not accept", where)
				continue
			}
			if v != nil {
				checkDefault(t, where, r.Default(i), v)
			}
			if drivers == nil {
				continue
			}
			cell := r.Cells["drivers"]
			named := strings.Fields(strings.NewReplacer(",", " ", "(required)", " ").Replace(cell))
			if cell == "all" || cell == "" {
				named = slices.Sorted(maps.Keys(allDrivers(drivers)))
			}
			if got := slices.Sorted(slices.Values(named)); !slices.Equal(got, drivers[o]) {
				t.Errorf("%s: the page says drivers %v, the reader accepts it for %v", where, got, drivers[o])
			}
		}
	}
	for _, o := range slices.Sorted(maps.Keys(want)) {
		if !documented[o] {
			t.Errorf("%s: the reader accepts %q, the page does not document it", heading, o)
		}
	}
}

// allDrivers is the set of every driver of drivers.
func allDrivers(drivers map[string][]string) map[string]bool {
	all := map[string]bool{}
	for _, ds := range drivers {
		for _, d := range ds {
			all[d] = true
		}
	}
	return all
}
