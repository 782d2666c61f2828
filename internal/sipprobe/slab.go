package sipprobe

import (
	"sync"
	"sync/atomic"
)

// Transactions live in a slab: chunks of slotsPerChunk transactions, made
// as the number in flight first needs them and kept for reuse. A
// transaction's branch key carries its slot number in its low 32 bits and
// its registration above (see newKey), so a response finds its
// transaction by index, with no map entry and no pool (at 50,000 probes
// in flight, a map of them and a sync.Pool behind it cost 3.6 MB beside
// the transactions themselves).
const (
	chunkBits     = 10
	slotsPerChunk = 1 << chunkBits // 160 KiB of 160-byte transactions
	maxChunks     = 1 << 14        // 16M transactions in flight at most
	maxSlots      = maxChunks * slotsPerChunk
)

// chunk is one block of slots.
type chunk [slotsPerChunk]transaction

// slab hands out transactions at stable addresses. acquire and release
// take its own mutex; at may be called by anyone holding the table's
// mutex (a chunk is published before any of its slots is handed out).
type slab struct {
	mu     sync.Mutex
	free   []uint32 // released slots, reused last in first out
	made   atomic.Uint32
	chunks [maxChunks]atomic.Pointer[chunk]
}

// acquire returns a free transaction, making a chunk when none is left.
// It returns nil when maxSlots transactions are in use.
func (s *slab) acquire() *transaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		idx := s.free[n-1]
		s.free = s.free[:n-1]
		return s.at(idx)
	}
	idx := s.made.Load()
	if idx == maxSlots {
		return nil
	}
	if idx%slotsPerChunk == 0 {
		c := new(chunk)
		for i := range c {
			c[i].idx = idx + uint32(i)
		}
		s.chunks[idx>>chunkBits].Store(c)
	}
	s.made.Store(idx + 1)
	return s.at(idx)
}

// release makes tx, reset and no longer registered, free for reuse.
func (s *slab) release(tx *transaction) {
	s.mu.Lock()
	s.free = append(s.free, tx.idx)
	s.mu.Unlock()
}

// at returns the transaction in slot idx, or nil if the slot was never
// made (a response can name any slot).
func (s *slab) at(idx uint32) *transaction {
	if idx >= s.made.Load() {
		return nil
	}
	return &s.chunks[idx>>chunkBits].Load()[idx%slotsPerChunk]
}

// newKey returns the branch key of the gen-th registration of slot idx:
// the slot in the low 32 bits, above them gen through a bijection salted
// per prober. A branch must be unique in time (RFC 3261 section 8.1.1.7):
// a stateful proxy that sees a branch again within its transaction's
// lifetime (Timer J, 32 s) answers with the old response, whose Call-ID
// fails the new probe. The busiest slots are reused thousands of times a
// second, so random bits would repeat a slot's branch after about 2^16
// reuses; a slot's keys repeat only after 2^32. Responses are not forged
// by guessing a key: the Call-ID, 64 random bits, must match too.
func newKey(idx, gen, salt uint32) uint64 {
	return uint64(gen*0x9e3779b9^salt)<<32 | uint64(idx)
}

// slotOf returns the slot a key names.
func slotOf(key uint64) uint32 { return uint32(key) }
