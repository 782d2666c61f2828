package source

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// format prints what the reader made of a list file, one destination a
// line, or its error.
func format(ds []Destination, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s:%d: set=%d uri=%s disabled=%t priority=%d attrs=%q duid=%q\n",
			filepath.Base(d.File), d.Line, d.Set, d.URI, d.Disabled, d.Priority, d.Attrs, d.DUID)
	}
	return b.String()
}

// TestDispatcherFileGolden reads each testdata/dispatcher/*.list and
// compares the destinations, or the file:line error, with its .golden.
func TestDispatcherFileGolden(t *testing.T) {
	lists, _ := filepath.Glob("testdata/dispatcher/*.list")
	if len(lists) == 0 {
		t.Fatal("no testdata/dispatcher/*.list")
	}
	for _, name := range lists {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			got := format(ReadDispatcherFile(filepath.Base(name), data))
			golden := strings.TrimSuffix(name, ".list") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestDispatcherLongLine: a line Kamailio would read as two is refused.
func TestDispatcherLongLine(t *testing.T) {
	long := "1 sip:192.0.2.1 0 0 duid=" + strings.Repeat("x", 1000) + "\n"
	_, err := ReadDispatcherFile("ds.list", []byte("# x\n"+long))
	if want := "ds.list:2: a line of 1025 bytes: Kamailio reads at most 1023 as one line"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// FuzzDispatcherFile reads arbitrary bytes as a dispatcher list: an
// error naming a line of the input, or destinations whose every field
// came from their line, never a panic.
func FuzzDispatcherFile(f *testing.F) {
	lists, _ := filepath.Glob("testdata/dispatcher/*.list")
	for _, name := range lists {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("1 sip:[::1]:5060;transport=tcp 12 3 duid=x;weight=1\n"))
	f.Add([]byte("4294967296 sip:192.0.2.1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ds, err := ReadDispatcherFile("ds.list", in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ds.list:") {
				t.Fatalf("error without its place: %v", err)
			}
			return
		}
		lines := strings.Split(string(in), "\n")
		for _, d := range ds {
			if d.Line < 1 || d.Line > len(lines) || !strings.Contains(lines[d.Line-1], d.URI) ||
				!strings.Contains(lines[d.Line-1], d.Attrs) || d.Set < 0 || d.Priority < 0 {
				t.Fatalf("destination %+v not from its line", d)
			}
			if _, err := Name(d); err != nil {
				t.Fatalf("a destination the reader took has no name: %v", err)
			}
		}
	})
}
