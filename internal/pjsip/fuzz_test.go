package pjsip

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// fuzzFS gives fuzzed files something to include: a valid file, a file
// that includes the main one (a loop), and one with an error.
var fuzzFS = fstest.MapFS{
	"aor.conf":   {Data: []byte("[inc]\ntype=aor\ncontact=sip:inc@192.0.2.1\nqualify_frequency=30\n")},
	"loop.conf":  {Data: []byte("#include fuzz.conf\n")},
	"bad.conf":   {Data: []byte("[x]\ntype=aor\nqualify_failures=0\n")},
	"fuzz.conf":  {Data: []byte("[f]\ntype=aor\n")},
	"d/1.conf":   {Data: []byte("[d1]\ntype=endpoint\naors=inc\n")},
	"d/2.conf":   {Data: []byte("[inc](+type=aor)\nqualify_failures=2\n")},
	"wizard.inc": {Data: []byte("[w]\ntype=wizard\nremote_hosts=192.0.2.5\n")},
}

// sentinels are the errors every parse error must wrap one of.
var sentinels = []error{ErrSyntax, ErrInclude, ErrIncludeLoop, ErrNoSection, ErrUnknownOption, ErrValue, ErrDuplicate, ErrReference}

// FuzzParse checks that no input crashes the reader, that every error is
// an *Error with a place and a sentinel, and that every accepted AoR is
// valid: sorted, with a valid policy and sip: contacts.
func FuzzParse(f *testing.F) {
	for _, seed := range goldenSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := Parse("fuzz.conf", src, Options{FS: fuzzFS})
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		checkFuzzConfig(t, cfg)
	})
}

func checkFuzzError(t *testing.T, err error) {
	var e *Error
	if !errors.As(err, &e) || e.File == "" || e.Line < 1 {
		t.Fatalf("error without a place: %#v", err)
	}
	if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
}

func checkFuzzConfig(t *testing.T, cfg *Config) {
	if !slices.IsSortedFunc(cfg.AoRs, func(x, y AoR) int { return strings.Compare(x.Name, y.Name) }) {
		t.Fatalf("AoRs not sorted")
	}
	for _, a := range cfg.AoRs {
		if err := a.Policy.Validate(); err != nil {
			t.Fatalf("AoR %q accepted with %v", a.Name, err)
		}
		if a.Policy.Failures < 1 || a.Policy.Successes < 1 {
			t.Fatalf("AoR %q accepted with %+v", a.Name, a.Policy)
		}
		for _, c := range a.Contacts {
			if checkContact(c) != nil {
				t.Fatalf("AoR %q accepted contact %q", a.Name, c)
			}
		}
	}
}

// goldenSeeds returns the golden trees' files as seeds, besides the
// checked-in corpus in testdata/fuzz/FuzzParse.
func goldenSeeds(f *testing.F) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.conf"))
	if err != nil {
		f.Fatal(err)
	}
	var seeds [][]byte
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, src)
	}
	return seeds
}
