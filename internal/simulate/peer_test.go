package simulate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestTimerEOffsets(t *testing.T) {
	var got []time.Duration
	for off := time.Duration(0); off < 20*time.Second; off = nextSend(off) {
		got = append(got, off)
	}
	want := []time.Duration{0, sec(0.5), sec(1.5), sec(3.5), sec(7.5), sec(11.5), sec(15.5), sec(19.5)}
	if !slices.Equal(got, want) {
		t.Fatalf("sends at %v, want %v", got, want)
	}
}

// binomial checks k successes in n trials against probability p.
func binomial(t *testing.T, what string, k, n int, p float64) {
	t.Helper()
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if math.Abs(float64(k)-float64(n)*p) > z*sd {
		t.Errorf("%s: %d of %d, want %.1f within %.1f", what, k, n, float64(n)*p, z*sd)
	}
}

func TestPacketLossRetransmits(t *testing.T) {
	// With T = 3 s and RTT 20 ms, copies go at 0, 0.5 and 1.5 s (the one
	// at 3.5 s is past the deadline): a probe fails only when each copy
	// loses its request or its response.
	const n, loss = 200000, 0.3
	p := newPeer(Loss{Packet: loss}, DefaultRTT, rand.New(rand.NewPCG(1, 2)))
	fails, byRTT := 0, map[time.Duration]int{}
	at := epoch
	for range n {
		res, end := p.probe(at, 3*time.Second)
		if res.Reason != qualify.ReasonNone {
			fails++
			if end != at.Add(3*time.Second) {
				t.Fatalf("failed probe ends at %v, want its deadline", end.Sub(at))
			}
		} else {
			byRTT[res.RTT]++
		}
		at = at.Add(time.Minute)
	}
	copyOK := (1 - loss) * (1 - loss)
	binomial(t, "failed probes", fails, n, math.Pow(1-copyOK, 3))
	binomial(t, "answered by the first copy", byRTT[DefaultRTT], n, copyOK)
	binomial(t, "answered by the second copy", byRTT[sec(0.5)+DefaultRTT], n, (1-copyOK)*copyOK)
	if len(byRTT) != 3 {
		t.Errorf("RTTs %v, want one per copy", byRTT)
	}
}

func TestDeadPeerNeverAnswers(t *testing.T) {
	p := newPeer(Loss{Packet: 0}, DefaultRTT, rand.New(rand.NewPCG(1, 2)))
	p.die(epoch.Add(sec(0.25)))
	if res, _ := p.probe(epoch, 3*time.Second); res.Reason != qualify.ReasonNone || res.RTT != DefaultRTT {
		t.Fatalf("a copy sent before the death was not answered: %+v", res)
	}
	if res, _ := p.probe(epoch.Add(time.Second), 3*time.Second); res.Reason != qualify.ReasonTimeout || p.deadSent != 1 {
		t.Fatalf("dead peer: %+v, dead sends %d", res, p.deadSent)
	}
	p.revive(epoch.Add(time.Minute))
	if res, _ := p.probe(epoch.Add(time.Minute), 3*time.Second); res.Reason != qualify.ReasonNone {
		t.Fatalf("revived peer: %+v", res)
	}
}

func TestGilbertElliottChannel(t *testing.T) {
	// Pairs of sends d = B apart, the pairs far apart (independent): the
	// first is lost with probability P, both with P(P + (1-P)e^(-d(1/B+1/G))).
	const n, loss, burst = 100000, 0.1, 10 * time.Second
	p := newPeer(Loss{Probe: loss, Burst: burst}, DefaultRTT, rand.New(rand.NewPCG(3, 4)))
	first, both := 0, 0
	at := epoch
	for range n {
		a, b := p.lost(at, loss), p.lost(at.Add(burst), loss)
		if a {
			first++
		}
		if a && b {
			both++
		}
		at = at.Add(100 * burst)
	}
	good := burst.Seconds() * (1 - loss) / loss
	stay := loss + (1-loss)*math.Exp(-burst.Seconds()*(1/burst.Seconds()+1/good))
	binomial(t, "lost", first, n, loss)
	binomial(t, "both lost", both, n, loss*stay)
}

func TestGilbertElliottExtremes(t *testing.T) {
	for _, loss := range []float64{0, 1} {
		p := newPeer(Loss{Probe: loss, Burst: time.Second}, DefaultRTT, rand.New(rand.NewPCG(1, 1)))
		for i := range 1000 {
			if got := p.lost(epoch.Add(time.Duration(i)*time.Second), loss); got != (loss == 1) {
				t.Fatalf("loss %v: lost = %v", loss, got)
			}
		}
	}
}
