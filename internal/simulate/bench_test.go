package simulate

import (
	"context"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// BenchmarkHealthyProbes measures simulated probes per second of one
// engine driven in virtual time (one core): the reference policy at 5%
// probe loss.
func BenchmarkHealthyProbes(b *testing.B) {
	p := qualify.Policy{Frequency: 30 * time.Second, Timeout: 3 * time.Second, Failures: 3, RetryInterval: 2 * time.Second}
	cfg := Config{Loss: Loss{Probe: 0.05}, Days: 100, Trials: 1, Workers: 1}
	probes := 0
	for b.Loop() {
		rs, err := Run(context.Background(), []AoR{{Name: "ref", Policy: p}}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		probes += rs[0].Probes
	}
	b.ReportMetric(float64(probes)/b.Elapsed().Seconds(), "probes/s")
}
