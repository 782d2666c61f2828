package state

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"iter"
	"math"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/atomicfile"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// castagnoli is CRC-32C, computed by the CPU's instruction where it has one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Stats says what Write wrote.
type Stats struct {
	// Contacts is how many states were written: those worth restoring.
	Contacts int
	// Bytes is the file's size.
	Bytes int64
}

// Write writes h, the contacts of pages and the histories of hists (each
// nil: none) to path atomically: a temporary file in path's directory,
// written, fsynced, renamed over path, then the directory fsynced. Only
// states engine.Restore could use are written (probed contacts of AoRs
// with qualify on). On error path is left as it was.
func Write(path string, h Header, pages iter.Seq[[]engine.Saved], hists iter.Seq[*engine.History]) (Stats, error) {
	var st Stats
	err := atomicWrite(path, func(w io.Writer) (err error) {
		st, err = Encode(w, h, pages, hists)
		return err
	})
	return st, err
}

// Histories yields the histories of e's AoRs that have one, for Write:
// the engine's lock is held for one history at a time, and the History
// yielded is reused for the next.
func Histories(e *engine.Engine) iter.Seq[*engine.History] {
	return func(yield func(*engine.History) bool) {
		var h engine.History
		for _, name := range e.HistoryNames() {
			if e.HistoryTo(&h, name) && !yield(&h) {
				return
			}
		}
	}
}

// Pages yields e's saved states page by page (engine.SavedPage), for
// Write: the engine's lock is held for one page at a time.
func Pages(e *engine.Engine) iter.Seq[[]engine.Saved] {
	return func(yield func([]engine.Saved) bool) {
		var page []engine.Saved
		for after, more := "", true; more; {
			page, more = e.SavedPage(page, after, pageSize)
			if !yield(page) || !more {
				return
			}
			after = page[len(page)-1].AoR
		}
	}
}

// pageSize is how many contacts Pages takes per hold of the engine's
// lock: about a third of a millisecond at a million contacts.
const pageSize = 1024

// atomicWrite writes path with fill (atomicfile.Write). On error path
// is left as it was.
func atomicWrite(path string, fill func(io.Writer) error) error {
	if err := atomicfile.Write(path, fill); err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	return nil
}

// Encode writes a state file of h, the contacts of pages and the
// histories of hists (each nil: none) to w, with a fresh salt.
func Encode(w io.Writer, h Header, pages iter.Seq[[]engine.Saved], hists iter.Seq[*engine.History]) (Stats, error) {
	e := encoder{w: w, crc: crc32.New(castagnoli), opts: map[optionsKey]uint64{}}
	rand.Read(e.salt[:])
	e.header(h)
	if pages == nil {
		pages = func(func([]engine.Saved) bool) {}
	}
	for page := range pages {
		for i := range page {
			if kept(&page[i]) {
				e.record(&page[i])
			}
		}
		if err := e.flush(); err != nil {
			return Stats{}, err
		}
	}
	e.buf = append(e.buf, endOfRecords)
	if err := e.histories(hists); err != nil {
		return Stats{}, err
	}
	if err := e.trailer(); err != nil {
		return Stats{}, err
	}
	return Stats{Contacts: e.n, Bytes: e.size}, nil
}

// optionsKey is an AoR's options as the engine interns them.
type optionsKey struct {
	p *qualify.Policy
	o *probe.Options
}

// encoder appends records to buf, which flush hands to w and the CRC.
type encoder struct {
	w    io.Writer
	crc  hash.Hash32
	buf  []byte
	size int64
	n    int
	salt [saltSize]byte

	opts     map[optionsKey]uint64 // index of each options written
	last     optionsKey            // the previous record's, at index lastOpt
	lastOpt  uint64
	aor, uri string // the previous record's
	written  int64  // the header's time, Unix microseconds
}

func (e *encoder) flush() error {
	e.crc.Write(e.buf)
	e.size += int64(len(e.buf))
	_, err := e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return err
}

func (e *encoder) header(h Header) {
	var flags uint16
	if h.Clean {
		flags |= flagClean
	}
	e.buf = append(e.buf, magic...)
	e.buf = binary.LittleEndian.AppendUint16(e.buf, Version)
	e.buf = binary.LittleEndian.AppendUint16(e.buf, flags)
	e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(h.Written.UnixNano()))
	e.buf = binary.LittleEndian.AppendUint64(e.buf, h.Seq)
	e.buf = append(e.buf, e.salt[:]...)
	e.written = h.Written.UnixMicro()
}

// trailer ends the histories and writes the count of records and the
// CRC of all before it.
func (e *encoder) trailer() error {
	e.buf = append(e.buf, endOfRecords)
	e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(e.n))
	if err := e.flush(); err != nil {
		return err
	}
	_, err := e.w.Write(binary.LittleEndian.AppendUint32(nil, e.crc.Sum32()))
	e.size += 4
	return err
}

func (e *encoder) record(s *engine.Saved) {
	e.buf = append(e.buf, packStatus(s))
	e.buf, e.aor = frontCode(e.buf, e.aor, s.AoR)
	e.buf, e.uri = frontCode(e.buf, e.uri, s.URI)
	e.options(optionsKey{s.Policy, s.Probe})
	e.buf = binary.AppendUvarint(e.buf, uint64(s.State.Failures))
	e.buf = binary.AppendUvarint(e.buf, uint64(s.State.Successes))
	if learned(s.State) {
		e.learned(s.State)
	}
	if s.State.Draining {
		e.buf = binary.AppendVarint(e.buf, s.DrainEnd.UnixMicro()-e.written)
	}
	e.buf = binary.AppendVarint(e.buf, e.written-s.Last.At.UnixMicro())
	e.buf = binary.AppendUvarint(e.buf, uint64(max(s.RTT.Microseconds(), 0)))
	e.buf = binary.AppendUvarint(e.buf, uint64(max(s.Last.Code, 0)))
	e.buf = appendString(e.buf, trimmed(s.Last.Detail))
	e.stats(&s.Stats)
	e.n++
}

// stats writes a record's statistics.
func (e *encoder) stats(s *engine.Stats) {
	for _, v := range [...]uint64{s.Probes, s.Failures, s.LossBits[0], s.LossBits[1],
		micros(s.SRTT), micros(s.RTTVar), micros(s.RTTMin), micros(s.RTTMax)} {
		e.buf = binary.AppendUvarint(e.buf, v)
	}
}

// micros returns d in whole microseconds, 0 for a negative d.
func micros(d time.Duration) uint64 { return uint64(max(d.Microseconds(), 0)) }

// histories writes each history of hists after a historyFollows byte,
// flushing after each, and then the end marker.
func (e *encoder) histories(hists iter.Seq[*engine.History]) error {
	if hists == nil {
		return nil
	}
	for h := range hists {
		if len(h.AoR) > maxString {
			continue
		}
		e.buf = append(e.buf, historyFollows)
		e.history(h)
		if err := e.flush(); err != nil {
			return err
		}
	}
	return nil
}

// history writes h: its AoR, width and first bucket's start (against
// written, in microseconds), its buckets, and its changes, each string
// coded against the previous change's.
func (e *encoder) history(h *engine.History) {
	e.buf = appendString(e.buf, h.AoR)
	e.buf = binary.AppendUvarint(e.buf, uint64(max(h.Width, 0)))
	var first int64
	if len(h.Buckets) > 0 {
		first = h.Buckets[0].Start.UnixMicro()
	}
	e.buf = binary.AppendVarint(e.buf, e.written-first)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(h.Buckets)))
	for i := range h.Buckets {
		e.bucket(&h.Buckets[i], h.Width)
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(len(h.Changes)))
	var uri, detail string
	for i := range h.Changes {
		c := &h.Changes[i]
		e.buf = binary.AppendVarint(e.buf, e.written-c.Time.UnixMicro())
		e.buf, uri = frontCode(e.buf, uri, trimmed(c.URI))
		e.buf = append(e.buf, packChange(c))
		e.buf = binary.AppendUvarint(e.buf, uint64(max(c.Code, 0)))
		e.buf, detail = frontCode(e.buf, detail, trimmed(c.Detail))
	}
}

// bucket writes b of a history of width: its counts, its RTTs as the
// minimum and the steps up to the median and the maximum, and its
// routable time as the milliseconds short of the width, so that a
// steady bucket takes a few bytes.
func (e *encoder) bucket(b *engine.Bucket, width time.Duration) {
	lo, mid, hi := micros(b.RTTMin), micros(b.RTTP50), micros(b.RTTMax)
	mid, hi = max(mid, lo), max(hi, mid, lo)
	short := max(width.Milliseconds()-b.Routable.Milliseconds(), 0)
	for _, v := range [...]uint64{uint64(max(b.Probes, 0)), uint64(max(b.Failures, 0)), lo, mid - lo, hi - mid, uint64(short),
		uint64(max(b.Calls, 0)), uint64(max(b.CallFailures, 0))} {
		e.buf = binary.AppendUvarint(e.buf, v)
	}
}

// options writes the index of k's options, followed by the options when
// they are new to the file.
func (e *encoder) options(k optionsKey) {
	if k == e.last && e.n > 0 {
		e.buf = binary.AppendUvarint(e.buf, e.lastOpt)
		return
	}
	i, ok := e.opts[k]
	if !ok {
		i = uint64(len(e.opts))
		e.opts[k] = i
	}
	e.last, e.lastOpt = k, i
	e.buf = binary.AppendUvarint(e.buf, i)
	if !ok {
		e.policy(k.p)
		sealed := seal(*k.o, &e.salt)
		for _, s := range probeStrings(&sealed) {
			e.buf = appendString(e.buf, trimmed(*s)) // a cut option no longer matches: not restored
		}
	}
}

func (e *encoder) policy(p *qualify.Policy) {
	for _, v := range []int64{int64(p.Frequency), int64(p.Timeout), int64(p.RetryInterval), int64(p.DownInterval),
		int64(p.Failures), int64(p.Successes)} {
		e.buf = binary.AppendVarint(e.buf, v)
	}
	flags := policyFlags(p)
	e.buf = append(e.buf, flags)
	if flags&policyMore == 0 {
		return
	}
	e.buf = append(e.buf, p.FailuresMin, p.FailuresMax)
	e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(p.FalseOutagesPerDay))
	e.buf = binary.AppendVarint(e.buf, int64(p.FailureWindow))
	e.buf = appendString(e.buf, p.SuccessCodes.String())
}

// learned writes the state of a learned or windowed threshold: the held
// N, the loss estimate's counts, the run's start and whether the run
// spanned its window.
func (e *encoder) learned(st qualify.State) {
	spanned := byte(0)
	if st.Spanned {
		spanned = 1
	}
	e.buf = append(e.buf, st.Threshold, spanned)
	for _, v := range []uint32{st.Answered, st.Lost, st.RunStart} {
		e.buf = binary.AppendUvarint(e.buf, uint64(v))
	}
}

// frontCode appends s as the lengths of the prefix and the suffix it
// shares with prev, and the middle, and returns s as the next prev:
// "sip:c124@h:5060" after "sip:c123@h:5060" is 7, 7, "4".
func frontCode(b []byte, prev, s string) ([]byte, string) {
	p := commonPrefix(prev, s)
	q := commonSuffix(prev[p:], s[p:])
	b = binary.AppendUvarint(b, uint64(p))
	b = binary.AppendUvarint(b, uint64(q))
	return appendString(b, s[p:len(s)-q]), s
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func commonSuffix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[len(a)-1-i] != b[len(b)-1-i] {
			return i
		}
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// trimmed returns s cut to the maxString bytes the reader accepts.
func trimmed(s string) string {
	if len(s) <= maxString {
		return s
	}
	return strings.Clone(s[:maxString])
}
