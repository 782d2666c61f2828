package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

type silentProber struct{}

func (silentProber) Start(context.Context, probe.Target, uint64, func(uint64, qualify.Result)) {}

// TestObserverFlood: the daemon's sink takes at most the burst at once
// and DefaultRate a second after, drops the excess as flood, and counts
// what it took and dropped in the metrics.
func TestObserverFlood(t *testing.T) {
	eng, err := engine.New(engine.Config{Prober: silentProber{}})
	if err != nil {
		t.Fatal(err)
	}
	p := qualify.Policy{Frequency: 30 * time.Second}
	if err := eng.Apply([]engine.AoR{{Name: "a", Contacts: []string{"sip:192.0.2.7"}, Policy: &p}}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	o := newObserver(eng, m, func() time.Time { return now })
	batch := make([]observe.Observation, observe.DefaultBurst+500)
	for i := range batch {
		batch[i] = observe.Observation{Destination: "192.0.2.7:5060", Outcome: observe.Answered, Source: observe.SourceAMI}
	}
	if tally := o.Observe(batch); tally.Accepted != observe.DefaultBurst || tally.Dropped[observe.DropFlood] != 500 {
		t.Fatalf("first batch: %+v", tally)
	}
	now = now.Add(100 * time.Millisecond)
	if tally := o.Observe(batch[:200]); tally.Accepted != observe.DefaultRate/10 || tally.Dropped[observe.DropFlood] != 100 {
		t.Fatalf("100 ms later: %+v", tally)
	}
	o.Refused(observe.Tally{Dropped: [observe.NumDrops]int{observe.DropMalformed: 1}})
	for _, c := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"qualifyd_observations_total", []string{"answered", "ami"}, observe.DefaultBurst + observe.DefaultRate/10},
		{"qualifyd_observations_dropped_total", []string{"flood"}, 600},
		{"qualifyd_observations_dropped_total", []string{"malformed"}, 1},
	} {
		if got := counterValue(t, reg, c.name, c.label); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.label, got, c.want)
		}
	}
}

// counterValue reads one series of a counter vector by its label values
// in label-name order.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, values []string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(values) || l.GetValue() != values[i] {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
