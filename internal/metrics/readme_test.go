package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// readmeRow is one row of docs/metrics.md's table: the series' type
// and label names as documented.
type readmeRow struct {
	typ    string
	labels []string
}

// readmeMetrics reads docs/metrics.md's table (the page's first part,
// before its first section) by series name.
func readmeMetrics(t *testing.T) map[string]readmeRow {
	t.Helper()
	page, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, ok := strings.Cut(string(page), "\n## ")
	if !ok {
		t.Fatal("docs/metrics.md has no section after its table")
	}
	rows := map[string]readmeRow{}
	row := regexp.MustCompile("(?m)^\\| `(qualifyd_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var labels []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		slices.Sort(labels)
		rows[m[1]] = readmeRow{typ: m[2], labels: labels}
	}
	return rows
}

// gatherAll registers every series New, Watch, WatchSinks, WatchSources, WatchPanic and WatchCluster can make,
// with every option set, observes one probe and gathers them.
func gatherAll(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{PerAoR: true, Version: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(reg, Sources{Summary: func() engine.Summary { return engine.Summary{} },
		SIP:      func() SIPStats { return SIPStats{Dropped: map[string]uint64{"late": 0}} },
		InFlight: func() int { return 0 }, EventsDropped: func() uint64 { return 0 }, LogDropped: func() uint64 { return 0 },
		Calls: func() (uint64, uint64) { return 0, 0 }, AoR: probedAoR}); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchSinks(reg, func() []SinkStats { return []SinkStats{{Name: "edge", Calls: &CallWatchStats{}}} }); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchSources(reg, func() []SourceStats { return []SourceStats{{Name: "edge"}} }); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchPanic(reg, func() PanicStats { return PanicStats{} }); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchCluster(reg, func() ClusterStats { return ClusterStats{CertExpiry: time.Unix(1e9, 0)} }); err != nil {
		t.Fatal(err)
	}
	m.ObserveProbe("a", qualify.Result{Code: 200, RTT: time.Millisecond}, true, qualify.ReasonNone)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// TestREADMEDocumentsEverySeries checks that docs/metrics.md's table
// lists exactly the series New registers with every option set, each
// with its type and label names.
func TestREADMEDocumentsEverySeries(t *testing.T) {
	rows := readmeMetrics(t)
	var documented, registered []string
	for name := range rows {
		documented = append(documented, name)
	}
	for _, mf := range gatherAll(t) {
		name := mf.GetName()
		registered = append(registered, name)
		row, ok := rows[name]
		if !ok {
			continue
		}
		if typ := strings.ToLower(mf.GetType().String()); row.typ != typ {
			t.Errorf("%s: docs/metrics.md says %s, New registers a %s", name, row.typ, typ)
		}
		var labels []string
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		slices.Sort(labels)
		if !slices.Equal(row.labels, labels) {
			t.Errorf("%s: docs/metrics.md gives labels %v, New registers %v", name, row.labels, labels)
		}
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if !slices.Equal(documented, registered) {
		t.Fatalf("docs/metrics.md documents\n%v\nNew registers\n%v", documented, registered)
	}
}
