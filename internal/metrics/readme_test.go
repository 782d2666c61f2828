package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestREADMEDocumentsEverySeries checks that the README's Metrics table
// lists exactly the series New registers with every option set.
func TestREADMEDocumentsEverySeries(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Metrics\n")
	if !ok {
		t.Fatal("README has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(qualifyd_[a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{PerAoR: true, Version: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(reg, Sources{Summary: func() engine.Summary { return engine.Summary{} },
		SIP:      func() SIPStats { return SIPStats{Dropped: map[string]uint64{"late": 0}} },
		InFlight: func() int { return 0 }, EventsDropped: func() uint64 { return 0 },
		AoR: probedAoR}); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchSinks(reg, func() []SinkStats { return []SinkStats{{Name: "edge"}} }); err != nil {
		t.Fatal(err)
	}
	m.ObserveProbe("a", qualify.Result{Code: 200, RTT: time.Millisecond}, true, qualify.ReasonNone)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, mf := range mfs {
		registered = append(registered, mf.GetName())
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if !slices.Equal(documented, registered) {
		t.Fatalf("README documents\n%v\nNew registers\n%v", documented, registered)
	}
}
