package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSourceSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stats := []SourceStats{{Name: "edge", Up: true, AoRs: 3, LastSuccess: time.Unix(1764590400, 500e6), Errors: 2},
		{Name: "pbx", Errors: 1}}
	if err := m.WatchSources(reg, func() []SourceStats { return stats }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP qualifyd_source_aors AoRs imported from the source (its last good list).
# TYPE qualifyd_source_aors gauge
qualifyd_source_aors{source="edge"} 3
qualifyd_source_aors{source="pbx"} 0
# HELP qualifyd_source_errors_total Reads of the source that failed, returned garbage or were refused by the shrink guard.
# TYPE qualifyd_source_errors_total counter
qualifyd_source_errors_total{source="edge"} 2
qualifyd_source_errors_total{source="pbx"} 1
# HELP qualifyd_source_last_success_timestamp_seconds Unix time of the source's last successful read; 0 if none.
# TYPE qualifyd_source_last_success_timestamp_seconds gauge
qualifyd_source_last_success_timestamp_seconds{source="edge"} 1.7645904005e+09
qualifyd_source_last_success_timestamp_seconds{source="pbx"} 0
# HELP qualifyd_source_up 1 when the source's last read succeeded and its list was taken.
# TYPE qualifyd_source_up gauge
qualifyd_source_up{source="edge"} 1
qualifyd_source_up{source="pbx"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qualifyd_source_up", "qualifyd_source_aors",
		"qualifyd_source_last_success_timestamp_seconds", "qualifyd_source_errors_total"); err != nil {
		t.Fatal(err)
	}
}
