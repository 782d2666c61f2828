package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// maxFile bounds the size of a file Read reads: ten times a million
// contacts' file.
const maxFile = 1 << 30

// Read reads and checks the state file at path. An error wraps
// ErrForeign, ErrVersion or ErrCorrupt, or is the file system's (a
// missing file is fs.ErrNotExist).
func Read(path string) (*File, error) {
	_, f, err := load(path)
	return f, err
}

// load reads and decodes path, returning its bytes too.
func load(path string) ([]byte, *File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := Decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return data, f, nil
}

// Take reads the state file at path, as Read, for a process that
// continues the event numbers of the one that wrote it. A clean file
// (Header.Clean) is rewritten at once without its clean mark, so that
// should this process die before it writes a clean file of its own, the
// next one knows Seq is not its last number. The File returned keeps the
// clean mark it was read with; when the rewrite fails, Take returns the
// File with Clean false and the error.
func Take(path string) (*File, error) {
	data, f, err := load(path)
	if err != nil || !f.Clean {
		return f, err
	}
	binary.LittleEndian.PutUint16(data[len(magic)+2:], 0)
	binary.LittleEndian.PutUint32(data[len(data)-4:], crc32.Checksum(data[:len(data)-4], castagnoli))
	if err := atomicWrite(path, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		f.Clean = false
		return f, err
	}
	return f, nil
}

// readFile reads path, refusing one larger than maxFile.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxFile {
		return nil, fmt.Errorf("state file %s: %w: %d bytes", path, ErrForeign, fi.Size())
	}
	return os.ReadFile(path)
}

// Decode checks and decodes a state file. Every count and length in it is
// checked against the bytes left, so that what it allocates is bounded by
// len(data).
func Decode(data []byte) (*File, error) {
	if n := min(len(data), len(magic)); string(data[:n]) != magic[:n] {
		return nil, ErrForeign
	}
	if len(data) < headerSize+1+trailerSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(data))
	}
	v := int(binary.LittleEndian.Uint16(data[len(magic):]))
	if v < OldestVersion || v > Version {
		return nil, fmt.Errorf("%w: version %d, this qualifyd reads %d to %d", ErrVersion, v, OldestVersion, Version)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	f, err := decodeBody(body, v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return f, nil
}

// decodeBody decodes the header, the records, the histories (from
// version 2 on) and the count of a file of version v, the CRC already
// checked.
func decodeBody(body []byte, v int) (*File, error) {
	f := &File{Version: v}
	d := decoder{b: body, off: len(magic) + 2, budget: 64 * len(body), version: v}
	flags := d.u16()
	f.Written = time.Unix(0, int64(d.u64())).UTC()
	f.Seq = d.u64()
	copy(f.salt[:], d.bytes(saltSize))
	f.Clean = flags&flagClean != 0
	if flags&^flagClean != 0 {
		return nil, fmt.Errorf("unknown flags %#x", flags)
	}
	n := binary.LittleEndian.Uint64(body[len(body)-8:])
	if n > uint64((len(body)-headerSize)/d.minRecord()) {
		return nil, fmt.Errorf("%d records in %d bytes", n, len(body))
	}
	d.b = body[:len(body)-8]
	d.written = f.Written.UnixMicro()
	f.Contacts = make([]engine.Saved, 0, n)
	for d.err == nil && d.more() {
		f.Contacts = append(f.Contacts, engine.Saved{})
		d.record(&f.Contacts[len(f.Contacts)-1])
	}
	for i := range f.Contacts {
		f.Contacts[i].Held = f.Written // every state held when the file was written
	}
	if v >= 2 {
		f.Histories = d.histories()
	}
	d.end()
	switch {
	case d.err != nil:
		return nil, d.err
	case uint64(len(f.Contacts)) != n:
		return nil, fmt.Errorf("%d records, the trailer says %d", len(f.Contacts), n)
	}
	return f, nil
}

// decoder reads b from off; the first error stops it, and every read
// after it returns zero values.
type decoder struct {
	b       []byte
	off     int
	err     error
	budget  int // string bytes that may still be made
	written int64
	version int

	opts     []options
	aor, uri string // the previous record's
}

// options are one AoR's options as a file keeps them.
type options struct {
	p *qualify.Policy
	o *probe.Options
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("offset %d: "+format, append([]any{d.off}, args...)...)
	}
}

// minRecord is the fewest bytes a record of d's version takes.
func (d *decoder) minRecord() int {
	if d.version < 2 {
		return minRecordV1
	}
	return minRecord
}

// more reports whether a record follows, consuming the end marker.
func (d *decoder) more() bool {
	if d.err != nil || d.off >= len(d.b) {
		d.fail("no end of records")
		return false
	}
	if d.b[d.off] != endOfRecords {
		return true
	}
	d.off++
	return false
}

// end checks that nothing follows what was read.
func (d *decoder) end() {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the records", len(d.b)-d.off)
	}
}

func (d *decoder) record(s *engine.Saved) {
	ok, more := unpackStatus(d.byte(), d.version, s)
	if !ok {
		d.fail("bad status byte")
		return
	}
	s.AoR, d.aor = d.frontCoded(d.aor)
	s.URI, d.uri = d.frontCoded(d.uri)
	o := d.options()
	s.Policy, s.Probe = o.p, o.o
	s.State.Failures, s.State.Successes = d.u32(), d.u32()
	if more {
		d.learned(&s.State)
	}
	if s.State.Draining {
		s.DrainEnd = time.UnixMicro(d.written + d.varint()).UTC()
	}
	s.Last.At = time.UnixMicro(d.written - d.varint()).UTC()
	s.RTT = time.Duration(d.uvarint(uint64(qualify.MaxInterval.Microseconds()))) * time.Microsecond
	s.Last.Code = int(d.uvarint(999))
	s.Last.Detail = d.string()
	if d.version >= 2 {
		d.stats(&s.Stats)
	}
}

// stats reads a record's statistics.
func (d *decoder) stats(s *engine.Stats) {
	s.Probes = d.uvarint(1<<32 - 1)
	s.Failures = d.uvarint(s.Probes)
	s.LossBits = [2]uint64{d.uvarint(^uint64(0)), d.uvarint(^uint64(0))}
	for _, v := range []*time.Duration{&s.SRTT, &s.RTTVar, &s.RTTMin, &s.RTTMax} {
		*v = d.micros()
	}
}

// micros reads a duration in microseconds, at most maxMicros.
func (d *decoder) micros() time.Duration {
	return time.Duration(d.uvarint(maxMicros)) * time.Microsecond
}

// maxMicros bounds the RTTs of the statistics and the histories: 2^32
// microseconds, more than an hour.
const maxMicros = 1<<32 - 1

// histories reads the histories, each after a historyFollows byte, up to
// the end marker.
func (d *decoder) histories() []engine.History {
	var out []engine.History
	for d.err == nil {
		switch d.byte() {
		case endOfRecords:
			return out
		case historyFollows:
			out = append(out, engine.History{})
			d.history(&out[len(out)-1])
		default:
			d.fail("bad history marker")
		}
	}
	return nil
}

// history reads one history, as encoder.history writes it.
func (d *decoder) history(h *engine.History) {
	h.AoR = d.string()
	h.Width = time.Duration(d.uvarint(uint64(maxWidth)))
	first := time.UnixMicro(d.written - d.varint()).UTC()
	n := d.count(minBucket)
	if d.err == nil && h.Width == 0 && n > 0 {
		d.fail("buckets of no width")
	}
	h.Buckets = make([]engine.Bucket, n)
	for i := range h.Buckets {
		h.Buckets[i] = d.bucket(first.Add(time.Duration(i)*h.Width), h.Width)
	}
	h.Changes = make([]engine.Change, d.count(minChange))
	var uri, detail string
	for i := range h.Changes {
		c := &h.Changes[i]
		c.Time = time.UnixMicro(d.written - d.varint()).UTC()
		c.URI, uri = d.frontCoded(uri)
		if !unpackChange(d.byte(), c) {
			d.fail("bad change byte")
		}
		c.Code = int(d.uvarint(999))
		c.Detail, detail = d.frontCoded(detail)
	}
}

// maxWidth bounds a history's bucket width: a day.
const maxWidth = 24 * time.Hour

// count reads a count of items of at least size bytes each, which the
// bytes left must hold.
func (d *decoder) count(size int) int {
	return int(d.uvarint(uint64(max(len(d.b)-d.off, 0) / size)))
}

// bucket reads a bucket starting at start of a history of width.
func (d *decoder) bucket(start time.Time, width time.Duration) engine.Bucket {
	b := engine.Bucket{Start: start, Probes: int(d.uvarint(1<<32 - 1)), Failures: int(d.uvarint(1<<32 - 1))}
	lo := d.uvarint(maxMicros)
	mid := lo + d.uvarint(maxMicros-lo)
	hi := mid + d.uvarint(maxMicros-mid)
	b.RTTMin, b.RTTP50, b.RTTMax = time.Duration(lo)*time.Microsecond, time.Duration(mid)*time.Microsecond, time.Duration(hi)*time.Microsecond
	b.Routable = width - time.Duration(d.uvarint(uint64(width.Milliseconds())))*time.Millisecond
	if d.version >= 3 {
		b.Calls = int(d.uvarint(1<<32 - 1))
		b.CallFailures = int(d.uvarint(uint64(b.Calls)))
	}
	return b
}

// options reads an options index, and the options when the index is new.
func (d *decoder) options() options {
	i := d.uvarint(uint64(len(d.opts)))
	if d.err != nil {
		return options{}
	}
	if i < uint64(len(d.opts)) {
		return d.opts[i]
	}
	o := options{p: d.policy(), o: &probe.Options{}}
	for _, s := range probeStrings(o.o) {
		*s = d.string()
	}
	d.opts = append(d.opts, o)
	return o
}

func (d *decoder) policy() *qualify.Policy {
	p := &qualify.Policy{}
	for _, v := range []*time.Duration{&p.Frequency, &p.Timeout, &p.RetryInterval, &p.DownInterval} {
		*v = time.Duration(d.varint())
	}
	p.Failures, p.Successes = int(int32(d.varint())), int(int32(d.varint()))
	flags := d.byte()
	p.Only2xx, p.LatencyOnly, p.FailuresAuto = flags&policyOnly2xx != 0, flags&policyLatencyOnly != 0, flags&policyAuto != 0
	if flags&^policyFlagsKnown != 0 {
		d.fail("unknown policy flags %#x", flags)
	}
	if flags&policyMore != 0 {
		d.morePolicy(p)
	}
	return p
}

// morePolicy reads the options of detection that fits the link (see
// encoder.policy). A policy they make invalid is corrupt: the file was
// written from a validated one.
func (d *decoder) morePolicy(p *qualify.Policy) {
	p.FailuresMin, p.FailuresMax = d.byte(), d.byte()
	if b := d.bytes(8); b != nil {
		p.FalseOutagesPerDay = math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	p.FailureWindow = time.Duration(d.varint())
	codes := d.string()
	if d.err != nil {
		return
	}
	c, err := qualify.ParseCodes(codes)
	if codes != "" && err != nil {
		d.fail("success codes %q: %v", codes, err)
		return
	}
	p.SuccessCodes = c
	if err := p.Validate(); err != nil {
		d.fail("policy: %v", err)
	}
}

// learned reads the state of a learned or windowed threshold (see
// encoder.learned).
func (d *decoder) learned(st *qualify.State) {
	st.Threshold = d.byte()
	switch d.byte() {
	case 0:
	case 1:
		st.Spanned = true
	default:
		d.fail("bad spanned flag")
	}
	st.Answered, st.Lost, st.RunStart = d.u32(), d.u32(), d.u32()
}

// frontCoded reads a string coded against prev (see frontCode) and
// returns it twice, the second as the next prev.
func (d *decoder) frontCoded(prev string) (string, string) {
	p := d.uvarint(uint64(len(prev)))
	q := d.uvarint(uint64(len(prev)) - p)
	mid := d.bytes(int(d.uvarint(maxString - p - min(q, maxString-p))))
	if d.err != nil {
		return "", prev
	}
	if len(mid) == 0 && int(p+q) == len(prev) {
		return prev, prev
	}
	s := d.make(prev[:p], mid, prev[len(prev)-int(q):])
	return s, s
}

// make returns prefix+mid+suffix, charged to the budget.
func (d *decoder) make(prefix string, mid []byte, suffix string) string {
	n := len(prefix) + len(mid) + len(suffix)
	d.budget -= n
	switch {
	case n > maxString:
		d.fail("a name of %d bytes", n)
		return ""
	case d.budget < 0:
		d.fail("names longer than the file can hold")
		return ""
	}
	return prefix + string(mid) + suffix
}

func (d *decoder) string() string {
	b := d.bytes(int(d.uvarint(maxString)))
	if len(b) == 0 {
		return ""
	}
	return d.make("", b, "")
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b)-d.off {
		d.fail("%d bytes past the end", n)
		return nil
	}
	b := d.b[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) byte() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) u32() uint32 { return uint32(d.uvarint(1<<32 - 1)) }

// uvarint reads an unsigned varint no larger than most.
func (d *decoder) uvarint(most uint64) uint64 {
	v := number(d, binary.Uvarint)
	if v > most {
		d.fail("%d out of range (at most %d)", v, most)
		return 0
	}
	return v
}

func (d *decoder) varint() int64 { return number(d, binary.Varint) }

// number reads one varint with read (binary.Uvarint or binary.Varint).
func number[T int64 | uint64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}
