package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the new content replaces the old whole, with mode 0600 and
// no temporary file left; a failing fill leaves the old content.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.sources")
	write := func(s string) error {
		return Write(path, func(w io.Writer) error { _, err := io.WriteString(w, s); return err })
	}
	if err := write("old"); err != nil {
		t.Fatal(err)
	}
	if err := write("new"); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("broken")
	if err := Write(path, func(w io.Writer) error { io.WriteString(w, "half"); return broken }); !errors.Is(err, broken) {
		t.Fatalf("a failing fill returned %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != "new" {
		t.Fatalf("%s holds %q (%v), want new", path, data, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want only the target: %v", len(entries), entries)
	}
}
