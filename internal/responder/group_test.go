package responder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

func TestGroupSpreadsAndCounts(t *testing.T) {
	g, err := ListenGroup("127.0.0.1", 3, func(src netip.AddrPort) Action { return Action{} })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	addrs := g.Addrs()
	if len(addrs) != 3 || addrs[0] == addrs[1] || addrs[1] == addrs[2] {
		t.Fatalf("addresses %v, want 3 distinct", addrs)
	}
	p, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, a := range addrs {
		res := p.Probe(t.Context(), probe.Target{URI: "sip:x@" + a.String(), Timeout: 3 * time.Second})
		if res.Code != 200 {
			t.Fatalf("probe of %v: %+v", a, res)
		}
	}
	if a, d, i := g.Counts(); a != 3 || d != 0 || i != 0 {
		t.Fatalf("counts %d %d %d, want 3 answered", a, d, i)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenGroup("not-an-address", 1, nil); err == nil {
		t.Fatal("a bad host is accepted")
	}
}
