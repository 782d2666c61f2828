package engine

import (
	"math/bits"
	"time"
)

// lossWindow is how many of a contact's latest probes its loss ratio
// covers.
const lossWindow = 100

// maxStatRTT bounds the RTTs the statistics take, so that an RTT in
// eighths of a microsecond fits in 32 bits: far beyond any qualify
// timeout.
const maxStatRTT = (1<<32 - 1) / 8 * time.Microsecond

// stats are a contact's running statistics, in its slot: 40 bytes. A
// probe counts when its result is applied, a failure when its verdict is
// (qualify-semantics §4), whatever the contact's status.
type stats struct {
	// lost holds a bit per probe for the latest lossWindow probes: bit
	// i%lossWindow of probe number i (from 0) is set when it failed.
	lost [2]uint64
	// srtt8 and rttvar8 are RFC 6298's SRTT and RTTVAR in eighths of a
	// microsecond, so that the smoothing's integer steps do not stall a
	// microsecond short of a steady RTT.
	srtt8, rttvar8 uint32
	// rttMin and rttMax bound the successes' RTTs in microseconds (at
	// least 1); rttMax is 0 before the first success.
	rttMin, rttMax uint32
	// probes and failures count the applied probes and the failed ones.
	probes, failures uint32
}

// add counts one applied probe: failed unless ok, with rtt when ok.
func (s *stats) add(ok bool, rtt time.Duration) {
	i := s.probes % lossWindow
	word, bit := i/64, uint64(1)<<(i%64)
	s.probes++
	if !ok {
		s.failures++
		s.lost[word] |= bit
		return
	}
	s.lost[word] &^= bit
	s.sample(usec(rtt))
}

// sample feeds one RTT of r microseconds (RFC 6298 §2: the first sets
// SRTT to R and RTTVAR to R/2; then RTTVAR = 3/4 RTTVAR + 1/4 |SRTT-R|
// and SRTT = 7/8 SRTT + 1/8 R, RTTVAR first).
func (s *stats) sample(r uint32) {
	r8 := int64(r) * 8
	if s.rttMax == 0 {
		s.srtt8, s.rttvar8, s.rttMin, s.rttMax = uint32(r8), uint32(r8/2), r, r
		return
	}
	srtt := int64(s.srtt8)
	diff := srtt - r8
	if diff < 0 {
		diff = -diff
	}
	s.rttvar8 = uint32((3*int64(s.rttvar8) + diff) / 4)
	s.srtt8 = uint32((7*srtt + r8) / 8)
	s.rttMin, s.rttMax = min(s.rttMin, r), max(s.rttMax, r)
}

// usec returns d in whole microseconds for the statistics: at least 1,
// at most maxStatRTT's.
func usec(d time.Duration) uint32 {
	return uint32(max(min(d, maxStatRTT)/time.Microsecond, 1))
}

// public returns s as snapshots show it.
func (s *stats) public() Stats {
	p := Stats{Probes: uint64(s.probes), Failures: uint64(s.failures), LossWindow: int(min(s.probes, lossWindow)), LossBits: s.lost}
	if p.LossWindow > 0 {
		p.Loss = float64(bits.OnesCount64(s.lost[0])+bits.OnesCount64(s.lost[1])) / float64(p.LossWindow)
	}
	if s.rttMax > 0 {
		p.SRTT, p.RTTVar = eighths(s.srtt8), eighths(s.rttvar8)
		p.RTTMin, p.RTTMax = time.Duration(s.rttMin)*time.Microsecond, time.Duration(s.rttMax)*time.Microsecond
	}
	return p
}

// eighths returns v eighths of a microsecond, rounded to the microsecond.
func eighths(v uint32) time.Duration {
	return time.Duration((uint64(v)+4)/8) * time.Microsecond
}

// statsOf is the inverse of public, for Restore: the RTTs rounded to the
// microsecond, and the loss ring from Stats.LossBits, of which only the
// bits of the window's probes are taken.
func statsOf(p Stats) stats {
	s := stats{probes: uint32(p.Probes), failures: uint32(p.Failures)}
	n := min(s.probes, lossWindow)
	for w := range s.lost {
		if k := int(n) - 64*w; k > 0 {
			s.lost[w] = p.LossBits[w] & (1<<min(k, 64) - 1)
		}
	}
	if p.RTTMax > 0 {
		s.srtt8, s.rttvar8 = usec(p.SRTT)*8, uint32(min(p.RTTVar, maxStatRTT)/time.Microsecond)*8
		s.rttMin, s.rttMax = usec(p.RTTMin), usec(p.RTTMax)
	}
	return s
}
