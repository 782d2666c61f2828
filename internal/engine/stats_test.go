package engine

import (
	"testing"
	"testing/synctest"
	"time"
)

// probeStep is one applied probe fed to the statistics.
type probeStep struct {
	ok  bool
	rtt time.Duration
}

func TestStatsRFC6298(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name  string
		steps []probeStep
		want  Stats
	}{
		{"none", nil, Stats{}},
		{"first sample: SRTT=R, RTTVAR=R/2", []probeStep{{true, 100 * ms}},
			Stats{SRTT: 100 * ms, RTTVar: 50 * ms, RTTMin: 100 * ms, RTTMax: 100 * ms, Probes: 1, LossWindow: 1}},
		// RTTVAR = 3/4*50 + 1/4*|100-200| = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5.
		{"second sample", []probeStep{{true, 100 * ms}, {true, 200 * ms}},
			Stats{SRTT: 112500 * time.Microsecond, RTTVar: 62500 * time.Microsecond, RTTMin: 100 * ms, RTTMax: 200 * ms,
				Probes: 2, LossWindow: 2}},
		{"a failure counts, its RTT does not", []probeStep{{true, 100 * ms}, {false, 900 * ms}},
			Stats{SRTT: 100 * ms, RTTVar: 50 * ms, RTTMin: 100 * ms, RTTMax: 100 * ms, Probes: 2, Failures: 1,
				Loss: 0.5, LossWindow: 2, LossBits: [2]uint64{2, 0}}},
		{"failures only", []probeStep{{false, 0}, {false, 0}},
			Stats{Probes: 2, Failures: 2, Loss: 1, LossWindow: 2, LossBits: [2]uint64{3, 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s stats
			for _, st := range c.steps {
				s.add(st.ok, st.rtt)
			}
			if got := s.public(); got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestStatsSteadyRTT(t *testing.T) {
	// The smoothing's integer steps reach a steady RTT to the microsecond,
	// and its deviation goes to zero.
	var s stats
	s.add(true, 10*time.Millisecond)
	for range 300 {
		s.add(true, 1234*time.Microsecond)
	}
	p := s.public()
	if p.SRTT != 1234*time.Microsecond || p.RTTVar != 0 || p.RTTMin != 1234*time.Microsecond || p.RTTMax != 10*time.Millisecond {
		t.Fatalf("got %+v", p)
	}
}

func TestStatsLossWindow(t *testing.T) {
	// The loss covers the last 100 probes: 50 failures, then 100
	// successes leave none; 10 failures more are 10 of the last 100.
	var s stats
	for range 50 {
		s.add(false, 0)
	}
	for range 100 {
		s.add(true, time.Millisecond)
	}
	if p := s.public(); p.Loss != 0 || p.LossWindow != 100 || p.Probes != 150 || p.Failures != 50 {
		t.Fatalf("after 50 failures and 100 successes: %+v", p)
	}
	for range 10 {
		s.add(false, 0)
	}
	if p := s.public(); p.Loss != 0.1 || p.LossWindow != 100 || p.Failures != 60 {
		t.Fatalf("after 10 failures more: %+v", p)
	}
	if r := statsOf(s.public()); r != s {
		t.Fatalf("statsOf(public) = %+v, want %+v", r, s)
	}
}

func TestStatsOfMasksTheWindow(t *testing.T) {
	// Saved loss bits beyond the window's probes (a damaged file) do not
	// count.
	s := statsOf(Stats{Probes: 3, Failures: 1, LossBits: [2]uint64{^uint64(0), ^uint64(0)}})
	if p := s.public(); p.Loss != 1 || p.LossWindow != 3 || p.LossBits != [2]uint64{7, 0} {
		t.Fatalf("got %+v", p)
	}
	s = statsOf(Stats{Probes: 1000, LossBits: [2]uint64{^uint64(0), ^uint64(0)}})
	if p := s.public(); p.Loss != 1 || p.LossBits[1] != 1<<36-1 {
		t.Fatalf("got %+v", p)
	}
}

// TestRestoreStats: a restored contact takes its saved statistics, and
// its next probe continues them.
func TestRestoreStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Rand: func() float64 { return 0.5 }}, answersUntil(time.Hour))
		h.apply(AoR{Name: "pbx07", Contacts: []string{trunk}, Policy: new(referencePolicy())})
		s := down(h.t0, 20*time.Second)
		s.Stats = Stats{SRTT: 12 * time.Millisecond, RTTVar: 2 * time.Millisecond, RTTMin: 9 * time.Millisecond, RTTMax: 40 * time.Millisecond,
			Probes: 103, Failures: 5, LossBits: [2]uint64{1<<2 | 1<<3 | 1<<4, 0}}
		h.e.Restore([]Saved{s}, nil)
		a, _ := h.e.AoR("pbx07")
		want := s.Stats
		want.Loss, want.LossWindow = 0.03, 100
		if got := a.Contacts[0].Stats; got != want {
			t.Fatalf("restored %+v\nwant %+v", got, want)
		}
		h.until(16 * time.Second) // one success of 10 ms: probe number 103, bit 3
		a, _ = h.e.AoR("pbx07")
		// RTTVAR = 3/4*2 + 1/4*|12-10| = 2; SRTT = 7/8*12 + 1/8*10 = 11.75.
		want = Stats{SRTT: 11750 * time.Microsecond, RTTVar: 2 * time.Millisecond, RTTMin: 9 * time.Millisecond, RTTMax: 40 * time.Millisecond,
			Probes: 104, Failures: 5, Loss: 0.02, LossWindow: 100, LossBits: [2]uint64{1<<2 | 1<<4, 0}}
		if got := a.Contacts[0].Stats; got != want {
			t.Fatalf("after a probe %+v\nwant %+v", got, want)
		}
	})
}
