package responder

import (
	"fmt"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// TestStreamAnswersTheProber: qualifyd's prober gets 200 OK over TCP,
// every probe on the one connection it keeps.
func TestStreamAnswersTheProber(t *testing.T) {
	s, err := ListenStream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	target := probe.Target{URI: fmt.Sprintf("sip:x@%s;transport=tcp", s.Addr()), Timeout: 3 * time.Second}
	for i := range 3 {
		if res := p.Probe(t.Context(), target); res.Code != 200 {
			t.Fatalf("probe %d: %+v", i, res)
		}
	}
	if accepted, answered := s.Counts(); accepted != 1 || answered != 3 {
		t.Fatalf("accepted %d connections, answered %d requests; want 1, 3", accepted, answered)
	}
}
