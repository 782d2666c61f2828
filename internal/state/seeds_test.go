package state

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite FuzzRead's seed corpus in testdata/fuzz")

// TestWriteSeeds writes FuzzRead's seeds with -write-seeds: a good file,
// and copies cut short or with a byte changed (whose checksum the fuzzer
// then has to get past).
func TestWriteSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite the corpus")
	}
	good := encoded(t, Header{Written: written, Seq: 42, Clean: true}, sample(), sampleHistories()...)
	v1, err := os.ReadFile("testdata/v1.state")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := os.ReadFile("testdata/v2.state")
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{"good": good, "good-v1": v1, "good-v2": v2, "empty-state": encoded(t, Header{Written: written}, nil),
		"truncated": good[:len(good)/2], "magic-only": []byte(magic), "foreign": []byte("not a state file\n"),
		"mark": EncodeMark(Mark{Of: written, At: written.Add(time.Minute)}), "mark-truncated": EncodeMark(Mark{Of: written})[:20]}
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
