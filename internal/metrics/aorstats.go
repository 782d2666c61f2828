package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/engine"
)

var (
	descAoRSRTT = prometheus.NewDesc("qualifyd_aor_rtt_srtt_seconds",
		"Smoothed RTT (RFC 6298 SRTT) per AoR: the lowest of its contacts that had a success.", []string{"aor"}, nil)
	descAoRLoss = prometheus.NewDesc("qualifyd_aor_loss_ratio",
		"Share of failed probes among the last 100 per AoR: the lowest of its contacts that were probed.", []string{"aor"}, nil)
)

// aorStatsCollector exports, at scrape time, the statistics of the AoRs
// that have per-AoR series: each the best of its contacts, as the AoR is
// available when its best contact is routable.
type aorStatsCollector struct {
	set *aorSet
	aor func(name string) (engine.AoRSnapshot, bool)
}

// Describe implements prometheus.Collector.
func (c *aorStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAoRSRTT
	ch <- descAoRLoss
}

// Collect implements prometheus.Collector.
func (c *aorStatsCollector) Collect(ch chan<- prometheus.Metric) {
	for name := range *c.set.byName.Load() {
		a, ok := c.aor(name)
		if !ok {
			continue // removed by a reload
		}
		srtt, loss, rtts, probed := best(a.Contacts)
		if rtts {
			ch <- prometheus.MustNewConstMetric(descAoRSRTT, prometheus.GaugeValue, srtt, name)
		}
		if probed {
			ch <- prometheus.MustNewConstMetric(descAoRLoss, prometheus.GaugeValue, loss, name)
		}
	}
}

// best returns the lowest SRTT in seconds among cs with a success (rtts
// when there is one) and the lowest loss ratio among cs probed (probed
// when there is one).
func best(cs []engine.ContactSnapshot) (srtt, loss float64, rtts, probed bool) {
	for i := range cs {
		s := &cs[i].Stats
		if s.RTTMax > 0 && (!rtts || s.SRTT.Seconds() < srtt) {
			srtt, rtts = s.SRTT.Seconds(), true
		}
		if s.LossWindow > 0 && (!probed || s.Loss < loss) {
			loss, probed = s.Loss, true
		}
	}
	return srtt, loss, rtts, probed
}
