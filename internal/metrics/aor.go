package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// OtherAoR is the aor label value of observations beyond the per-AoR cap.
const OtherAoR = "_other"

// aorSeries are one aor label value's resolved children.
type aorSeries struct {
	probes  [2]prometheus.Counter // failure, success
	rtt     prometheus.Observer
	changes [statuses]prometheus.Counter // by new status
}

func (s *aorSeries) observeProbe(r qualify.Result, ok bool) {
	s.probes[b2i(ok)].Inc()
	if ok {
		s.rtt.Observe(r.RTT.Seconds())
	}
}

// aorSet maps AoR names to their series, at most limit of them. Reads load
// an immutable map without locking; the first sight of an AoR copies the
// map under mu. Once full, unknown names go to other without locking.
type aorSet struct {
	limit    int
	byName   atomic.Pointer[map[string]*aorSeries]
	full     atomic.Bool
	other    *aorSeries
	overflow prometheus.Counter

	mu      sync.Mutex // serialises additions
	probes  *prometheus.CounterVec
	rtt     *prometheus.HistogramVec
	changes *prometheus.CounterVec
}

func newAoRSet(limit int) *aorSet {
	if limit <= 0 {
		limit = DefaultPerAoRLimit
	}
	s := &aorSet{limit: limit}
	s.probes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_aor_probes_total",
		Help: "Applied probes per AoR by result (success, failure).",
	}, []string{"aor", "result"})
	s.rtt = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "qualifyd_aor_probe_rtt_seconds", Help: "Round-trip time of successful probes per AoR.", Buckets: Buckets,
	}, []string{"aor"})
	s.changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qualifyd_aor_status_changes_total",
		Help: "Contact status changes per AoR by new status.",
	}, []string{"aor", "to"})
	s.overflow = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qualifyd_aor_overflow_total",
		Help: "Per-AoR observations recorded under aor=\"_other\" because the per-AoR cap was reached.",
	})
	s.other = s.series(OtherAoR)
	s.byName.Store(&map[string]*aorSeries{})
	return s
}

func (s *aorSet) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.probes, s.rtt, s.changes, s.overflow}
}

// series resolves the children of one aor label value.
func (s *aorSet) series(aor string) *aorSeries {
	a := &aorSeries{rtt: s.rtt.WithLabelValues(aor)}
	a.probes = [2]prometheus.Counter{s.probes.WithLabelValues(aor, "failure"), s.probes.WithLabelValues(aor, "success")}
	for st := range statuses {
		a.changes[st] = s.changes.WithLabelValues(aor, qualify.Status(st).String())
	}
	return a
}

// get returns aor's series, creating them on first sight while under the
// cap, else the _other series.
func (s *aorSet) get(aor string) *aorSeries {
	if a, ok := (*s.byName.Load())[aor]; ok {
		return a
	}
	if s.full.Load() {
		s.overflow.Inc()
		return s.other
	}
	return s.add(aor)
}

// add creates aor's series under mu, copying the map, unless the cap is
// reached meanwhile.
func (s *aorSet) add(aor string) *aorSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.byName.Load()
	if a, ok := old[aor]; ok {
		return a
	}
	if len(old) >= s.limit {
		s.full.Store(true)
		s.overflow.Inc()
		return s.other
	}
	next := make(map[string]*aorSeries, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	a := s.series(aor)
	next[aor] = a
	s.byName.Store(&next)
	return a
}
