package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

var written = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// sample is a few saved states: two AoRs sharing options, one with
// credentials, a contact never probed and one of a qualify-off AoR
// (neither written).
func sample() []engine.Saved {
	p := &qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second, Only2xx: true}
	off := &qualify.Policy{Timeout: 3 * time.Second}
	none := &probe.Options{}
	auth := &probe.Options{Transport: "tcp", FromUser: "qualifyd", Auth: probe.Credentials{Username: "u", Password: "secret", Realm: "r"}}
	at := written.Add(-1500 * time.Millisecond)
	return []engine.Saved{
		{AoR: "pbx07", URI: "sip:pbx07@192.0.2.7:5060", Policy: p, Probe: none, State: qualify.State{Status: qualify.Unreachable, Failures: 3},
			Last: engine.LastResult{At: at, Reason: qualify.ReasonTimeout, Detail: "no response"}, RTT: 12345 * time.Microsecond,
			Stats: engine.Stats{SRTT: 12 * time.Millisecond, RTTVar: 1500 * time.Microsecond, RTTMin: 9 * time.Millisecond, RTTMax: 31 * time.Millisecond,
				Probes: 1234, Failures: 77, LossBits: [2]uint64{0x7 << 60, 1<<36 - 1}}},
		{AoR: "pbx07", URI: "sip:pbx07-b@192.0.2.8:5060", Policy: p, Probe: none, State: qualify.State{Status: qualify.Reachable},
			Last: engine.LastResult{At: at, OK: true, Code: 200}, RTT: time.Millisecond,
			Stats: engine.Stats{SRTT: time.Millisecond, RTTVar: 500 * time.Microsecond, RTTMin: time.Millisecond, RTTMax: time.Millisecond, Probes: 1}},
		{AoR: "pbx07", URI: "sip:never@192.0.2.9", Policy: p, Probe: none},
		{AoR: "pbx08", URI: "sip:pbx08@192.0.2.10;transport=tcp", Policy: p, Probe: auth, State: qualify.State{Status: qualify.Unreachable, Failures: 3, Successes: 1},
			Last: engine.LastResult{At: at.Add(-time.Hour), OK: true, Code: 401, Reason: qualify.ReasonNone}},
		{AoR: "phone", URI: "sip:phone@192.0.2.11", Policy: off, Probe: none, Last: engine.LastResult{At: at, OK: true, Code: 200}},
		{AoR: "trunk", URI: "sip:trunk@192.0.2.12", Policy: learning(), Probe: none,
			State: qualify.State{Status: qualify.Reachable, Failures: 2, Threshold: 4, Spanned: true, Answered: 70000, Lost: 12, RunStart: 4_000_000_000},
			Last:  engine.LastResult{At: at, Reason: qualify.ReasonTimeout}},
		{AoR: "trunk2", URI: "sip:trunk2@192.0.2.13", Policy: p, Probe: none, State: qualify.State{Status: qualify.Reachable, Draining: true},
			Last: engine.LastResult{At: at, Reason: qualify.ReasonDraining, Code: 503}, DrainEnd: written.Add(90 * time.Second)},
	}
}

// learning is a policy with every option of detection that fits the link
// (qualify-semantics §2): its contacts' learned state must survive too.
func learning() *qualify.Policy {
	codes, err := qualify.ParseCodes("200-299,404")
	if err != nil {
		panic(err)
	}
	return &qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second, Successes: 1,
		FailuresAuto: true, FailuresMin: 2, FailuresMax: 6, FalseOutagesPerDay: 0.1, FailureWindow: 20500 * time.Millisecond, SuccessCodes: codes}
}

// sampleHistories are two AoRs' histories: one of three buckets (a
// steady one, an outage, one without a probe yet) and two changes, one
// empty.
func sampleHistories() []engine.History {
	start := written.Add(-3 * time.Minute).Truncate(time.Minute)
	ms := time.Millisecond
	return []engine.History{{AoR: "pbx07", Width: time.Minute,
		Buckets: []engine.Bucket{
			{Start: start, Probes: 2, RTTMin: 9 * ms, RTTP50: 11 * ms, RTTMax: 31 * ms, Routable: time.Minute},
			{Start: start.Add(time.Minute), Probes: 12, Failures: 11, RTTMin: 10 * ms, RTTP50: 10 * ms, RTTMax: 10 * ms, Routable: 13500 * ms,
				Calls: 7, CallFailures: 2},
			{Start: start.Add(2 * time.Minute)},
		},
		Changes: []engine.Change{
			{Time: start.Add(73 * time.Second), URI: "sip:pbx07@192.0.2.7:5060", From: qualify.Reachable, To: qualify.Unreachable,
				Reason: qualify.ReasonTimeout, Detail: "no response"},
			{Time: start.Add(140 * time.Second), URI: "sip:pbx07-b@192.0.2.8:5060", From: qualify.Reachable, To: qualify.Removed},
			{Time: start.Add(150 * time.Second), URI: "sip:pbx07@192.0.2.7:5060", From: qualify.NonQualified, To: qualify.Unreachable,
				Reason: qualify.ReasonStatus, Code: 503, Detail: "Service Unavailable"},
		}},
		{AoR: "quiet", Width: time.Minute, Buckets: []engine.Bucket{}, Changes: []engine.Change{}},
	}
}

// pagesOf yields ss in pages of two.
func pagesOf(ss []engine.Saved) iter.Seq[[]engine.Saved] { return slices.Chunk(ss, 2) }

// historiesOf yields hs.
func historiesOf(hs []engine.History) iter.Seq[*engine.History] {
	return func(yield func(*engine.History) bool) {
		for i := range hs {
			if !yield(&hs[i]) {
				return
			}
		}
	}
}

func encoded(t *testing.T, h Header, ss []engine.Saved, hs ...engine.History) []byte {
	t.Helper()
	var b bytes.Buffer
	st, err := Encode(&b, h, pagesOf(ss), historiesOf(hs))
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes != int64(b.Len()) {
		t.Fatalf("Stats.Bytes %d, wrote %d", st.Bytes, b.Len())
	}
	return b.Bytes()
}

// TestRoundTrip: what Encode writes, Decode gives back: the header,
// every state worth restoring with its options and statistics, the
// password sealed, times to the microsecond, and the histories.
func TestRoundTrip(t *testing.T) {
	h := Header{Written: written, Seq: 1_764_417_600_000_042, Clean: true}
	f, err := Decode(encoded(t, h, sample(), sampleHistories()...))
	if err != nil {
		t.Fatal(err)
	}
	if f.Header != h {
		t.Fatalf("header %+v, want %+v", f.Header, h)
	}
	if f.Version != Version || !slices.EqualFunc(f.Histories, sampleHistories(), sameHistory) {
		t.Fatalf("version %d, histories\n%+v\nwant\n%+v", f.Version, f.Histories, sampleHistories())
	}
	checkContacts(t, f, true)
}

// TestReadVersion1: a file of the first format, without statistics or
// histories, reads as it did (testdata/v1.state: sample()'s file,
// written by the first format's Encode).
func TestReadVersion1(t *testing.T) {
	f, err := Read("testdata/v1.state")
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 1 || f.Seq != 42 || !f.Clean || f.Histories != nil {
		t.Fatalf("header %+v, version %d, histories %v", f.Header, f.Version, f.Histories)
	}
	checkContacts(t, f, false)
}

// TestReadVersion2: a file of the second format, without drains or
// calls, reads as it did (testdata/v2.state: sample()'s file, written by
// the second format's Encode).
func TestReadVersion2(t *testing.T) {
	f, err := Read("testdata/v2.state")
	if err != nil {
		t.Fatal(err)
	}
	want := sampleHistories()
	want[0].Buckets[1].Calls, want[0].Buckets[1].CallFailures = 0, 0
	if f.Version != 2 || f.Seq != 42 || !f.Clean || !slices.EqualFunc(f.Histories, want, sameHistory) {
		t.Fatalf("header %+v, version %d, histories %+v", f.Header, f.Version, f.Histories)
	}
	checkContacts(t, f, true)
}

// sameHistory reports whether x and y are equal, their times at the same
// instants.
func sameHistory(x, y engine.History) bool {
	return x.AoR == y.AoR && x.Width == y.Width &&
		slices.EqualFunc(x.Buckets, y.Buckets, func(a, b engine.Bucket) bool {
			a.Start, b.Start = a.Start.UTC(), b.Start.UTC()
			return a == b
		}) &&
		slices.EqualFunc(x.Changes, y.Changes, func(a, b engine.Change) bool {
			a.Time, b.Time = a.Time.UTC(), b.Time.UTC()
			return a == b
		})
}

// checkContacts checks f's contacts against sample()'s written ones,
// with their statistics when stats, else with none.
func checkContacts(t *testing.T, f *File, stats bool) {
	t.Helper()
	in := sample()
	want := []engine.Saved{in[0], in[1], in[3], in[5], in[6]}
	switch f.Version {
	case 1:
		want = want[:3] // the first format's file was written before the learned threshold's contact
	case 2:
		want = want[:4] // and the second's before the draining one
	}
	for i := range want {
		if !stats {
			want[i].Stats = engine.Stats{}
		}
	}
	if len(f.Contacts) != len(want) {
		t.Fatalf("%d contacts, want %d: %+v", len(f.Contacts), len(want), f.Contacts)
	}
	for i, w := range want {
		g := f.Contacts[i]
		wo := f.Seal(*w.Probe)
		if g.AoR != w.AoR || g.URI != w.URI || *g.Policy != *w.Policy || *g.Probe != wo || g.State != w.State ||
			!g.Last.At.Equal(w.Last.At) || g.Last.OK != w.Last.OK || g.Last.Reason != w.Last.Reason ||
			g.Last.Code != w.Last.Code || g.Last.Detail != w.Last.Detail || g.RTT != w.RTT || g.Stats != w.Stats ||
			!g.DrainEnd.Equal(w.DrainEnd) {
			t.Errorf("contact %d\n%+v %+v %+v\nwant\n%+v %+v %+v", i, g, *g.Policy, *g.Probe, w, *w.Policy, wo)
		}
	}
	if f.Contacts[0].Policy != f.Contacts[1].Policy {
		t.Error("equal options are not shared")
	}
	if p := f.Contacts[2].Probe.Auth.Password; p == "secret" || p == "" {
		t.Errorf("password kept as %q", p)
	}
}

// TestSealIsSalted: two files seal one password differently, each
// matching its own seal.
func TestSealIsSalted(t *testing.T) {
	a, _ := Decode(encoded(t, Header{Written: written}, sample()))
	b, _ := Decode(encoded(t, Header{Written: written}, sample()))
	o := *sample()[3].Probe
	if a.Seal(o) == b.Seal(o) || *a.Contacts[2].Probe != a.Seal(o) {
		t.Fatal("seal not salted per file, or not matching its own file")
	}
}

// TestTruncated: every prefix of a file is an error, never a state.
// TestSealDropsUnresolved: the configuration's note on an undefined
// transport or auth is not kept, and a contact whose options carry one
// still matches its saved state.
func TestSealDropsUnresolved(t *testing.T) {
	ss := sample()
	o := *ss[3].Probe
	o.Unresolved = `transport "t" is not defined: sent by the contact URI alone, as Asterisk does`
	ss[3].Probe = &o
	f, err := Decode(encoded(t, Header{Written: written}, ss))
	if err != nil {
		t.Fatal(err)
	}
	if g := *f.Contacts[2].Probe; g.Unresolved != "" || g != f.Seal(o) {
		t.Fatalf("saved %+v, sealed %+v", g, f.Seal(o))
	}
}

func TestTruncated(t *testing.T) {
	data := encoded(t, Header{Written: written}, sample())
	for n := range len(data) {
		if f, err := Decode(data[:n]); err == nil {
			t.Fatalf("%d of %d bytes decoded: %+v", n, len(data), f)
		} else if n >= len(magic) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d of %d bytes: %v, want ErrCorrupt", n, len(data), err)
		}
	}
}

// TestFlippedBits: a file with any one bit flipped is an error (CRC-32C
// finds every single-bit error), never a state or a panic.
func TestFlippedBits(t *testing.T) {
	data := encoded(t, Header{Written: written}, sample())
	for i := range len(data) * 8 {
		bad := bytes.Clone(data)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := Decode(bad); err == nil {
			t.Fatalf("bit %d flipped: decoded", i)
		}
	}
}

// TestForeignAndFuture: a file of another kind is ErrForeign, one of a
// later version ErrVersion.
func TestForeignAndFuture(t *testing.T) {
	data := encoded(t, Header{Written: written}, sample())
	future := bytes.Clone(data)
	future[len(magic)] = Version + 1
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"a JSON file", []byte(`{"contacts":[]}`), ErrForeign},
		{"another magic", append([]byte("qfydstaT"), data[len(magic):]...), ErrForeign},
		{"future version", future, ErrVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.data); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestCorruptBodies: files whose checksum is right but whose body is not
// are errors: hand-made bodies a writer would never make.
func TestCorruptBodies(t *testing.T) {
	good := encoded(t, Header{Written: written}, sample())
	body := good[:len(good)-4]
	records := body[headerSize : len(body)-8-2]
	tests := []struct {
		name    string
		records []byte
		count   uint64
	}{
		{"count too large", records, 6},
		{"count too small", records, 2},
		{"count beyond the file", records, 1 << 40},
		{"bad status", append([]byte{3}, records[1:]...), 5},
		{"unknown options", []byte{0, 0, 0, 1, 'a', 0, 0, 1, 'b', 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1},
		{"shared prefix longer than the last name", []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1},
		{"shared suffix longer than the last name", []byte{0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1},
		{"no end of records", records[:len(records)-1], 5},
		{"a history of buckets of no width", append(bytes.Clone(records), endOfRecords, historyFollows, 1, 'x', 0, 0, 1, 0, 0, 0, 0, 0, 0, 0), 5},
		{"a bad change", append(bytes.Clone(records), endOfRecords, historyFollows, 1, 'x', 1, 0, 0, 1, 0, 0, 0, 0, 0x80, 0, 0, 0, 0), 5},
		{"a bad history marker", append(bytes.Clone(records), endOfRecords, 2), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append(bytes.Clone(body[:headerSize]), tt.records...)
			if tt.name != "no end of records" {
				b = append(b, endOfRecords, endOfRecords) // and of histories
			}
			b = appendTrailer(b, tt.count)
			if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

// appendTrailer appends the count and the CRC of everything before it.
func appendTrailer(b []byte, n uint64) []byte {
	b = binary.LittleEndian.AppendUint64(b, n)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestWrite: Write leaves the new file in place, readable by its owner
// only, and no temporary file; a write that fails leaves the old file.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if _, err := Write(path, Header{Written: written, Seq: 7}, pagesOf(sample()), nil); err != nil {
		t.Fatal(err)
	}
	st, err := Write(path, Header{Written: written, Seq: 8}, pagesOf(sample()), nil)
	if err != nil || st.Contacts != 5 {
		t.Fatalf("Write = %+v, %v", st, err)
	}
	f, err := Read(path)
	if err != nil || f.Seq != 8 || len(f.Contacts) != 5 {
		t.Fatalf("Read = %+v, %v", f, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 || fi.Size() != st.Bytes {
		t.Errorf("mode %v size %d, want 0600 and %d", fi.Mode(), fi.Size(), st.Bytes)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %v", ents)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if _, err := Write(path, Header{Written: written, Seq: 9}, pagesOf(sample()), nil); err == nil && os.Geteuid() != 0 {
		t.Fatal("write into a read-only directory succeeded")
	}
	if f, err := Read(path); err != nil || f.Seq != 8 && os.Geteuid() != 0 {
		t.Fatalf("after a failed write: %+v, %v", f, err)
	}
}

// TestReadMissing: a missing file is the file system's error.
func TestReadMissing(t *testing.T) {
	if _, err := Read(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

// TestTake: Take gives a clean file back as it was and leaves it on disk
// without its clean mark; a file that is not clean stays as it is.
func TestTake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if _, err := Write(path, Header{Written: written, Seq: 7, Clean: true}, pagesOf(sample()), nil); err != nil {
		t.Fatal(err)
	}
	f, err := Take(path)
	if err != nil || !f.Clean || f.Seq != 7 || len(f.Contacts) != 5 {
		t.Fatalf("Take = %+v, %v", f, err)
	}
	again, err := Read(path)
	if err != nil || again.Clean || again.Seq != 7 || len(again.Contacts) != 5 || again.Seal(*sample()[3].Probe) != *again.Contacts[2].Probe {
		t.Fatalf("after Take: %+v, %v", again, err)
	}
	if f, err := Take(path); err != nil || f.Clean {
		t.Fatalf("Take of a file not clean = %+v, %v", f, err)
	}
}
