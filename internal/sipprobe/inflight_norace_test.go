//go:build !race

package sipprobe

import (
	"net"
	"testing"
	"time"
)

// inFlightTestN is the number of probes TestInFlight keeps in flight.
const inFlightTestN = 100_000

// TestProbeZeroAllocs: a UDP probe to an IP contact allocates nothing in
// steady state (the race detector's sync.Pool drops items, hence !race).
func TestProbeZeroAllocs(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go echo200(c, false)
	p := newProber(t, Config{})
	tg := target("sip:zero@"+c.LocalAddr().String(), 5*time.Second)
	ctx := t.Context()
	if n := testing.AllocsPerRun(500, func() {
		if res := p.Probe(ctx, tg); res.Code != 200 {
			t.Fatalf("got %+v", res)
		}
	}); n >= 0.5 {
		t.Errorf("%.2f allocations per probe, want 0", n)
	}
}
