package engine

import (
	"math/bits"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Defaults of the history's Config fields.
const (
	// DefaultHistoryAoRs is Config.HistoryAoRs' default: trunks, not a
	// million phones.
	DefaultHistoryAoRs = 1000
	// DefaultHistoryBucket is Config.HistoryBucket's default.
	DefaultHistoryBucket = time.Minute
	// DefaultHistoryLength is Config.HistoryLength's default.
	DefaultHistoryLength = 24 * time.Hour
	// MaxChanges is how many status changes an AoR's history keeps.
	MaxChanges = 200
)

// history is an AoR's recent past: a ring of buckets aligned to the wall
// clock, and a ring of its latest status changes. Its times are Unix
// nanoseconds. Guarded by Engine.mu.
//
// A probe touches only the fields up to rtts, next to each other, since
// each AoR's history is a cache miss: the current bucket is kept apart
// from the ring until it closes, and while a probe ends before next it
// costs no division by the width. A closed bucket is packed in 12 bytes,
// and the changes grow with use, so that a history of a day is 18 KiB
// and a phone that changes status once a day costs little more.
type history struct {
	// mark is the time up to which the routable time is counted; avail
	// is the AoR's availability since mark.
	mark  int64
	next  int64  // when the current bucket ends
	now   bucket // the current bucket, number cur
	avail bool
	// rtts are the current bucket's successful RTTs, for its median.
	rtts rttHistogram

	width int64    // of a bucket, in ns
	unit  int64    // of a packed bucket's routable time, in ns: 1 ms, or whole ms more for widths past 65 s
	ring  []packed // closed bucket number k at ring[k%len(ring)], for k in (cur-len(ring), cur)
	cur   int64    // number of the current bucket: its start / width
	first int64    // number of the first bucket kept

	changes []change // a ring once MaxChanges long: the latest, the oldest at head
	head    int
}

// bucket is the current interval of a history, or a closed one unpacked.
type bucket struct {
	rttMin, rttP50, rttMax uint32 // microseconds; 0 without a success
	probes, failures       uint16 // saturating
	calls, callFailures    uint16 // saturating
	routable               uint32 // milliseconds
}

// packed is a closed bucket in 16 bytes: its RTTs as f16, its routable
// time in units of history.unit.
type packed struct {
	probes, failures    uint16
	calls, callFailures uint16
	routable            uint16
	rtt                 [3]f16 // minimum, median, maximum
}

// pack returns b packed, its routable time in units of unit.
func (b *bucket) pack(unit int64) packed {
	ms := int64(time.Millisecond)
	return packed{probes: b.probes, failures: b.failures, calls: b.calls, callFailures: b.callFailures,
		routable: uint16((int64(b.routable)*ms + unit/2) / unit),
		rtt:      [3]f16{toF16(b.rttMin), toF16(b.rttP50), toF16(b.rttMax)}}
}

// unpack is the inverse of pack, the RTTs to f16's precision.
func (p *packed) unpack(unit int64) bucket {
	return bucket{probes: p.probes, failures: p.failures, calls: p.calls, callFailures: p.callFailures,
		routable: uint32(int64(p.routable) * unit / int64(time.Millisecond)),
		rttMin:   p.rtt[0].usec(), rttP50: p.rtt[1].usec(), rttMax: p.rtt[2].usec()}
}

// f16 is an RTT in microseconds in 16 bits: a 12-bit mantissa m and a
// 4-bit exponent e, m<<e; exact below 4,096 us, within 0.025% above, up
// to 134 s (longer RTTs are stored as that).
type f16 uint16

func toF16(v uint32) f16 {
	const most = 1<<12 - 1
	if v <= most {
		return f16(v)
	}
	e := bits.Len32(v) - 12
	m := (v + 1<<(e-1)) >> e // rounded
	if m > most {
		m, e = m>>1, e+1
	}
	if e > 15 {
		return f16(15<<12 | most)
	}
	return f16(uint32(e)<<12 | m)
}

func (f f16) usec() uint32 { return uint32(f&(1<<12-1)) << (f >> 12) }

// median returns the median estimate of rtts, b's RTTs, within b's
// bounds: exact for a bucket of one success.
func (b *bucket) median(rtts *rttHistogram) uint32 {
	if b.rttMax == 0 {
		return 0
	}
	return min(max(rtts.median(bin(b.rttMin), bin(b.rttMax)), b.rttMin), b.rttMax)
}

// change is one status change, as a history keeps it.
type change struct {
	at          int64
	uri, detail string
	from, to    qualify.Status
	reason      qualify.Reason
	code        int16
}

// newHistory returns an empty history of buckets of width over length,
// which starts at its first advance.
func newHistory(width, length time.Duration) *history {
	n := max(int(length/width), 1)
	wms := int64(width / time.Millisecond)
	unit := max((wms+1<<16-2)/(1<<16-1), 1) * int64(time.Millisecond) // whole ms, at most 65535 a bucket
	return &history{width: int64(width), unit: unit, ring: make([]packed, n), cur: -1}
}

// advance moves h to now: the routable time since mark is counted, and
// the buckets before now's are closed. A now before mark (the wall clock
// stepped back) counts as mark. Routable time is counted in whole
// milliseconds of the wall clock between the ends of each span, so that
// spans that meet add up without rounding.
func (h *history) advance(now int64) {
	if h.cur < 0 { // the first advance
		h.cur, h.first, h.mark = now/h.width, now/h.width, now
		h.next = (h.cur + 1) * h.width
		return
	}
	now = max(now, h.mark)
	if now >= h.next {
		h.jump(now)
	}
	h.credit(now)
}

// credit counts the routable time from mark to now, both in the current
// bucket, and moves mark to now.
func (h *history) credit(now int64) {
	const ms = int64(time.Millisecond)
	if h.avail {
		h.now.routable += uint32(now/ms - h.mark/ms)
	}
	h.mark = now
}

// jump closes the current bucket, and those up to now's, which becomes
// the current one with mark at its start.
func (h *history) jump(now int64) {
	h.credit(h.next)
	k := now / h.width
	n := int64(len(h.ring))
	h.now.rttP50 = h.now.median(&h.rtts)
	h.ring[h.cur%n] = h.now.pack(h.unit)
	h.rtts.reset(&h.now)
	h.now = bucket{}
	var skipped packed // a bucket without a probe: routable throughout, or not
	if h.avail {
		skipped.routable = uint16(h.width / h.unit)
	}
	for j := max(h.cur+1, k-n+1); j < k; j++ {
		h.ring[j%n] = skipped
	}
	h.cur, h.next, h.mark = k, (k+1)*h.width, k*h.width
	h.first = max(h.first, k-n+1)
}

// get returns the bucket numbered k, which must be kept.
func (h *history) get(k int64) bucket {
	if k == h.cur {
		return h.now
	}
	return h.ring[k%int64(len(h.ring))].unpack(h.unit)
}

// set stores b as the bucket numbered k, which must be kept.
func (h *history) set(k int64, b bucket) {
	if k == h.cur {
		h.now = b
		return
	}
	h.ring[k%int64(len(h.ring))] = b.pack(h.unit)
}

// probe counts an applied probe in the current bucket.
func (h *history) probe(ok bool, rtt time.Duration) {
	b := &h.now
	b.probes = satInc(b.probes)
	if !ok {
		b.failures = satInc(b.failures)
		return
	}
	r := usec(rtt)
	if b.rttMax == 0 {
		b.rttMin = r
	}
	b.rttMin, b.rttMax = min(b.rttMin, r), max(b.rttMax, r)
	h.rtts.add(r)
}

// call counts a call's outcome in the current bucket: failed when it
// indicts the peer (qualify-semantics §11).
func (h *history) call(failed bool) {
	b := &h.now
	b.calls = satInc(b.calls)
	if failed {
		b.callFailures = satInc(b.callFailures)
	}
}

func satInc(v uint16) uint16 {
	if v == ^uint16(0) {
		return v
	}
	return v + 1
}

// change records c, dropping the oldest change once MaxChanges are kept.
// The ring grows by doubling up to MaxChanges.
func (h *history) change(c change) {
	if len(h.changes) < MaxChanges {
		if len(h.changes) == cap(h.changes) {
			grown := make([]change, len(h.changes), min(max(2*cap(h.changes), 2), MaxChanges))
			copy(grown, h.changes)
			h.changes = grown
		}
		h.changes = append(h.changes, c)
		return
	}
	h.changes[h.head] = c
	h.head = (h.head + 1) % MaxChanges
}

// public copies h into p, reusing p's slices: the kept buckets oldest
// first, the current one's median estimated now.
func (h *history) public(p *History, aor string) {
	p.AoR, p.Width = aor, time.Duration(h.width)
	p.Buckets, p.Changes = p.Buckets[:0], p.Changes[:0]
	for k := h.first; k <= h.cur && h.cur >= 0; k++ {
		b := h.get(k)
		if k == h.cur {
			b.rttP50 = b.median(&h.rtts)
		}
		p.Buckets = append(p.Buckets, Bucket{
			Start: fromUnixNano(k * h.width), Probes: int(b.probes), Failures: int(b.failures),
			Calls: int(b.calls), CallFailures: int(b.callFailures),
			RTTMin: micros(b.rttMin), RTTP50: micros(b.rttP50), RTTMax: micros(b.rttMax),
			Routable: time.Duration(b.routable) * time.Millisecond,
		})
	}
	for i := range h.changes {
		c := &h.changes[(h.head+i)%len(h.changes)]
		p.Changes = append(p.Changes, Change{Time: fromUnixNano(c.at), URI: c.uri, From: c.from, To: c.to,
			Reason: c.reason, Detail: c.detail, Code: int(c.code)})
	}
}

func micros(v uint32) time.Duration { return time.Duration(v) * time.Microsecond }

// restore replaces h's buckets and changes with saved's, at now, the
// AoR's availability avail: a saved bucket goes to the bucket of this
// history holding its start, one older than the kept span is left out,
// and the gap between the saved history's end and now stays empty, its
// routable time unknown.
func (h *history) restore(saved *History, now int64, avail bool) {
	*h = history{width: h.width, unit: h.unit, ring: h.ring, cur: -1}
	clear(h.ring)
	h.advance(now)
	h.avail = avail
	for i := range saved.Buckets {
		h.restoreBucket(&saved.Buckets[i])
	}
	for _, c := range saved.Changes {
		h.change(change{at: c.Time.UnixNano(), uri: c.URI, from: c.From, to: c.To, reason: c.Reason, code: int16(c.Code), detail: c.Detail})
	}
}

// restoreBucket adds a saved bucket to the bucket holding its start, if
// that is kept and not after now's.
func (h *history) restoreBucket(s *Bucket) {
	k := s.Start.UnixNano() / h.width
	n := int64(len(h.ring))
	if k > h.cur || k <= h.cur-n {
		return
	}
	h.first = min(h.first, k)
	b := h.get(k)
	b.probes = satAdd(b.probes, s.Probes)
	b.failures = satAdd(b.failures, s.Failures)
	b.calls = satAdd(b.calls, s.Calls)
	b.callFailures = satAdd(b.callFailures, s.CallFailures)
	if s.RTTMax > 0 {
		lo, hi := usec(s.RTTMin), usec(s.RTTMax)
		p50 := min(max(usec(s.RTTP50), lo), hi)
		if b.rttMax == 0 {
			b.rttMin, b.rttP50 = lo, p50
		}
		b.rttMin, b.rttMax, b.rttP50 = min(b.rttMin, lo), max(b.rttMax, hi), max(b.rttP50, p50)
		if k == h.cur {
			h.rtts.add(p50)
		}
	}
	width := uint32(h.width / int64(time.Millisecond))
	b.routable = min(b.routable+uint32(min(max(s.Routable, 0), time.Duration(h.width))/time.Millisecond), width)
	h.set(k, b)
}

func satAdd(v uint16, n int) uint16 { return uint16(min(int(v)+max(n, 0), int(^uint16(0)))) }

// rttHistogram counts RTTs in bins of a quarter of an octave: the bins of
// [2^o, 2^(o+1)) microseconds are its four equal parts, so that a bin's
// middle is within 12.5% of any RTT in it. 92 bins cover up to 2^24 us
// (16.8 s); longer RTTs fall in the last.
type rttHistogram [histBins]uint16

const histBins = 92

// bin returns the bin of r microseconds.
func bin(r uint32) int {
	if r < 4 {
		return int(r)
	}
	o := bits.Len32(r) - 1
	return min(4*(o-1)+int(r>>(o-2)&3), histBins-1)
}

// middle returns the middle of bin i in microseconds.
func middle(i int) uint32 {
	if i < 4 {
		return uint32(i)
	}
	o, sub := i/4+1, uint32(i%4)
	return (4+sub)<<(o-2) + 1<<(o-2)/2
}

// add counts r microseconds, halving every bin when one is full, which
// keeps the shares.
func (h *rttHistogram) add(r uint32) {
	i := bin(r)
	if h[i] == ^uint16(0) {
		for j := range h {
			h[j] /= 2
		}
	}
	h[i]++
}

// median returns the middle of the bin holding the median (the lower
// one of an even count), of RTTs that are all in bins lo to hi; 0 when
// there is none.
func (h *rttHistogram) median(lo, hi int) uint32 {
	total := 0
	for _, c := range h[lo : hi+1] {
		total += int(c)
	}
	rank := (total + 1) / 2
	for i, c := range h[lo : hi+1] {
		if rank -= int(c); rank <= 0 && total > 0 {
			return middle(lo + i)
		}
	}
	return 0
}

// reset empties h, the histogram of b's RTTs: only the bins between b's
// minimum's and maximum's can hold any.
func (h *rttHistogram) reset(b *bucket) {
	if b.rttMax > 0 {
		clear(h[bin(b.rttMin) : bin(b.rttMax)+1])
	}
}
