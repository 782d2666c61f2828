package state

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// FuzzRead: any input is an error or a valid state, never a panic, and
// what it decodes is bounded by its size. Each input is tried as it is
// and with its last four bytes replaced by the right checksum, so that
// the fuzzer reaches the body's checks. Each is tried as a mark file
// too. The seeds in testdata/fuzz are a file of sample() and
// sampleHistories(), one of the first format, a mark, and damaged copies
// (TestWriteSeeds).
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data)
		if len(data) >= 4 {
			fixed := bytes.Clone(data)
			binary.LittleEndian.PutUint32(fixed[len(fixed)-4:], crc32.Checksum(fixed[:len(fixed)-4], castagnoli))
			check(t, fixed)
		}
	})
}

// check decodes data and checks what it gives, if anything.
func check(t *testing.T, data []byte) {
	if m, err := DecodeMark(data); err == nil && !bytes.Equal(EncodeMark(m), data) {
		t.Fatalf("mark %+v read from %q, written back as %q", m, data, EncodeMark(m))
	}
	st, err := Decode(data)
	if err != nil {
		return
	}
	if len(st.Contacts) > len(data)/minRecordV1 {
		t.Fatalf("%d contacts from %d bytes", len(st.Contacts), len(data))
	}
	for _, h := range st.Histories {
		if len(h.Buckets) > len(data)/minBucket || len(h.Changes) > len(data)/minChange || len(h.AoR) > maxString {
			t.Fatalf("a history of %d buckets and %d changes from %d bytes", len(h.Buckets), len(h.Changes), len(data))
		}
	}
	for _, c := range st.Contacts {
		if c.Policy == nil || c.Probe == nil || c.State.Status > 2 || len(c.AoR) > maxString || len(c.URI) > maxString {
			t.Fatalf("invalid contact %+v", c)
		}
	}
}
