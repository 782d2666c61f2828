package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram counts durations in log-linear buckets (64 per power of two of
// microseconds, so within 1.6%), in fixed memory and without locks: a
// million probes a minute must not grow the process whose RSS is measured.
type histogram struct {
	on      atomic.Bool
	buckets [64 * 40]atomic.Uint64
	max     atomic.Int64
}

const subBuckets = 64

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	e := bits.Len64(us) - 6 // us >> e is in [32, 64)
	return subBuckets/2*e + int(us>>e)
}

// lower returns the smallest microsecond value of bucket b.
func lower(b int) uint64 {
	if b < subBuckets {
		return uint64(b)
	}
	e := (b-subBuckets)/(subBuckets/2) + 1
	return uint64(b-subBuckets/2*e) << e
}

// observe counts d while the histogram is on.
func (h *histogram) observe(d time.Duration) {
	if !h.on.Load() {
		return
	}
	d = max(d, 0)
	us := uint64(d / time.Microsecond)
	b := min(bucketOf(us), len(h.buckets)-1)
	h.buckets[b].Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantileMs returns the q-quantile in milliseconds (the lower bound of
// its bucket).
func (h *histogram) quantileMs(q float64) float64 {
	var total uint64
	for i := range h.buckets {
		total += h.buckets[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen > rank {
			return float64(lower(i)) / 1000
		}
	}
	return h.maxMs()
}

func (h *histogram) maxMs() float64 { return float64(h.max.Load()) / 1e6 }
