package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// dashboard is the Grafana dashboard the Debian package installs.
const dashboard = "../../packaging/grafana/qualifyd.json"

// targetLabels are the labels Prometheus adds to every scraped series,
// which the registry does not have.
var targetLabels = []string{"instance", "job"}

// queries returns every PromQL expression of the dashboard: the panels'
// targets and the query variables' definitions.
func queries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

// familyLabels maps every registered family to its label names; a
// histogram's family also answers to its _bucket, _sum and _count
// series, with le on _bucket.
func familyLabels(mfs []*dto.MetricFamily) map[string][]string {
	out := map[string][]string{}
	for _, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		out[mf.GetName()] = labels
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			out[mf.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[mf.GetName()+"_sum"], out[mf.GetName()+"_count"] = labels, labels
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bqualifyd_[a-z0-9_]+`)
	// selectorLabel is a label matcher inside {...}.
	selectorLabel = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)\s*"`)
	// grouping is a by (...) or without (...) clause.
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// labelValues is a variable's label_values(metric, label).
	labelValues = regexp.MustCompile(`label_values\(\s*[a-z0-9_]+\s*,\s*([a-z_]+)\s*\)`)
)

// exprLabels returns the label names expr uses.
func exprLabels(expr string) []string {
	var out []string
	for _, m := range selectorLabel.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	for _, m := range labelValues.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestGrafanaDashboardNamesRealSeries checks that every metric a query
// of the dashboard names is one the registry has, and every label it
// names is a label of one of the metrics of that query (or a target
// label Prometheus adds), so that the dashboard cannot drift from the
// code.
func TestGrafanaDashboardNamesRealSeries(t *testing.T) {
	families := familyLabels(gatherAll(t))
	exprs := queries(t)
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d queries; want its panels' (at least 10)", len(exprs))
	}
	for _, expr := range exprs {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("query names no qualifyd series: %s", expr)
		}
		known := slices.Clone(targetLabels)
		for _, n := range names {
			labels, ok := families[n]
			if !ok {
				t.Errorf("query names %s, which the registry does not have: %s", n, expr)
			}
			known = append(known, labels...)
		}
		for _, l := range exprLabels(expr) {
			if !slices.Contains(known, l) {
				t.Errorf("query uses label %q, which none of %v has: %s", l, names, expr)
			}
		}
	}
}

// TestGrafanaLabelCheckCatchesDrift checks the checker itself on a
// query with a label no metric has.
func TestGrafanaLabelCheckCatchesDrift(t *testing.T) {
	families := familyLabels(gatherAll(t))
	expr := `sum by (carrier) (rate(qualifyd_probes_total{result="failure"}[5m]))`
	labels := exprLabels(expr)
	if !slices.Equal(labels, []string{"result", "carrier"}) {
		t.Fatalf("exprLabels = %v", labels)
	}
	if slices.Contains(families["qualifyd_probes_total"], "carrier") {
		t.Fatal("qualifyd_probes_total has a carrier label")
	}
	if _, ok := families["qualifyd_probe_rtt_seconds_bucket"]; !ok {
		t.Fatal("the histogram's _bucket series is not known")
	}
}
