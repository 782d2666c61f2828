package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// statusOrder is the order contact counts are shown in: the worst first.
var statusOrder = []qualify.Status{qualify.Unreachable, qualify.Reachable, qualify.NonQualified}

// statusCount is how many contacts have a status.
type statusCount struct {
	Status string
	N      int
}

// rowData is an AoR's row on GET /, and the head of /aors/NAME.
type rowData struct {
	Name, Href string
	Available  bool
	Contacts   int
	Counts     []statusCount // the statuses present, worst first
	RTT, Loss  string        // the best latest RTT, the loss over the recent probes
	// Probes, Calls and CallsFailed count the probes and the calls'
	// outcomes over the chart's span, and the calls that indicted the
	// peer (qualify-semantics §11); Calls is empty without any.
	Probes, ProbesFailed, Calls, CallsFailed string
	Chart                                    chart
	HasChart                                 bool
}

// row returns a's row of GET /, its chart drawn in buf.
func (s *Server) row(a *engine.AoRSnapshot, now time.Time, buf *chartBuf) rowData {
	return s.rowSized(a, now, rowChart, buf)
}

// rowSized returns a's row with a chart of sz drawn in buf.
func (s *Server) rowSized(a *engine.AoRSnapshot, now time.Time, sz chartSize, buf *chartBuf) rowData {
	r := rowData{Name: a.Name, Href: "/aors/" + url.PathEscape(a.Name), Available: a.Available,
		Contacts: len(a.Contacts), Counts: countStatuses(a.Contacts), RTT: "–", Loss: "–"}
	var best time.Duration
	var lost, window int
	for i := range a.Contacts {
		c := &a.Contacts[i]
		if c.Status == qualify.Reachable && c.RTT > 0 && (best == 0 || c.RTT < best) {
			best = c.RTT
		}
		lost += int(c.Stats.Loss*float64(c.Stats.LossWindow) + 0.5)
		window += c.Stats.LossWindow
	}
	if best > 0 {
		r.RTT = msText(best)
	}
	if window > 0 {
		r.Loss = percent(lost, window)
	}
	if h, ok := s.pageHistory(a.Name); ok && len(h.Buckets) > 0 {
		r.Chart, r.HasChart = drawChart(&h, sz, now, buf), true
		r.countDay(&h)
	}
	return r
}

// countDay fills r's counts of the probes and the calls over h's buckets.
func (r *rowData) countDay(h *engine.History) {
	var probes, failed, calls, callsFailed int
	for i := range h.Buckets {
		b := &h.Buckets[i]
		probes, failed, calls, callsFailed = probes+b.Probes, failed+b.Failures, calls+b.Calls, callsFailed+b.CallFailures
	}
	r.Probes, r.ProbesFailed = itoa(probes), itoa(failed)
	if calls > 0 {
		r.Calls, r.CallsFailed = itoa(calls), itoa(callsFailed)
	}
}

// countStatuses counts cs by status, in statusOrder, leaving out zeros.
func countStatuses(cs []engine.ContactSnapshot) []statusCount {
	n := make([]int, len(statusOrder))
	for i := range cs {
		if k := slices.Index(statusOrder, cs[i].Status); k >= 0 {
			n[k]++
		}
	}
	return statusCounts(n)
}

// statusCounts pairs n, counts in statusOrder, with their labels,
// leaving out zeros.
func statusCounts(n []int) []statusCount {
	var out []statusCount
	for k, st := range statusOrder {
		if n[k] > 0 {
			out = append(out, statusCount{Status: st.String(), N: n[k]})
		}
	}
	return out
}

// percent prints n of d as a percentage.
func percent(n, d int) string {
	p := 100 * float64(n) / float64(d)
	prec := 0
	if p > 0 && p < 10 {
		prec = 1
	}
	return strconv.FormatFloat(p, 'f', prec, 64) + " %"
}

// aorData is the model of /aors/NAME.
type aorData struct {
	Title    string
	Asset    string // assetTag
	Summary  summaryData
	Row      rowData
	Contacts []contactRow
	Changes  []string // newest first
	Policy   []policyLine
}

// contactRow is one contact of /aors/NAME with its statistics.
type contactRow struct {
	URI, Status, Phase, RTT, Last, Next string
	Failures, Successes                 string
	SRTT, RTTVar, Min, Max              string
	Probes, FailuresTotal, Loss         string
	LatencyOnly                         bool
	// Draining: the peer asked for a pause (qualify-semantics §11.4).
	Draining bool
	// NotProbedHere marks a contact another node probes (cluster mode).
	NotProbedHere bool
	// Cluster is the cluster's status, "" outside cluster mode; Votes
	// are each live vantage's.
	Cluster string
	Votes   []api.Vote
}

// policyLine is one effective qualify option.
type policyLine struct{ Option, Value string }

// aorPage serves GET /aors/{name}: the AoR's larger chart, its contacts
// with their statistics, its status changes and its effective policy.
// ?fragment=row serves its row of GET / alone, ?fragment=detail the page
// without its frame.
func (s *Server) aorPage(w http.ResponseWriter, r *http.Request) {
	a, ok := s.cfg.Engine.AoR(r.PathValue("name"))
	if !ok {
		writeError(w, http.StatusNotFound, "unknown AoR "+quote(r.PathValue("name")))
		return
	}
	now := s.cfg.Engine.Now() // the engine's clock, as its snapshots' times: a step of the system clock moves neither
	switch r.URL.Query().Get("fragment") {
	case "row":
		render(w, r, "row", s.row(&a, now, new(chartBuf)))
	case "detail":
		render(w, r, "detail", s.aorModel(&a, now))
	default:
		render(w, r, "aor", s.aorModel(&a, now))
	}
}

func (s *Server) aorModel(a *engine.AoRSnapshot, now time.Time) aorData {
	d := aorData{Title: a.Name + " · qualifyd", Asset: assetTag, Summary: s.summary(now), Row: s.rowSized(a, now, bigChart, new(chartBuf)),
		Policy: policyLines(&a.Policy)}
	for i := range a.Contacts {
		p := newContactRow(&a.Contacts[i], now)
		p.Cluster, p.Votes = s.votes(a.Name, p.URI)
		d.Contacts = append(d.Contacts, p)
	}
	if h, ok := s.pageHistory(a.Name); ok {
		for i := len(h.Changes) - 1; i >= 0; i-- {
			d.Changes = append(d.Changes, changeText(&h.Changes[i], time.DateTime))
		}
	}
	return d
}

func newContactRow(c *engine.ContactSnapshot, now time.Time) contactRow {
	st := &c.Stats
	p := contactRow{URI: c.URI, Status: c.Status.String(), Phase: c.Phase.String(),
		RTT: "–", Last: "never", Next: "–", LatencyOnly: c.LatencyOnly, NotProbedHere: c.Elsewhere,
		Draining: c.Phase == qualify.Draining,
		Failures: counter(c.Failures, c.FailureThreshold), Successes: counter(c.Successes, c.SuccessThreshold),
		SRTT: rttText(st.SRTT), RTTVar: rttText(st.RTTVar), Min: rttText(st.RTTMin), Max: rttText(st.RTTMax),
		Probes: strconv.FormatUint(st.Probes, 10), FailuresTotal: strconv.FormatUint(st.Failures, 10), Loss: "–"}
	if c.RTT > 0 {
		p.RTT = msText(c.RTT)
	}
	if st.LossWindow > 0 {
		p.Loss = percent(int(st.Loss*float64(st.LossWindow)+0.5), st.LossWindow) + " of " + itoa(st.LossWindow)
	}
	if !c.Last.At.IsZero() {
		p.Last = lastText(c.Last) + ", " + asterisk.Seconds(now.Sub(c.Last.At).Truncate(time.Second)) + " ago"
	}
	if c.InFlight {
		p.Next = "probing"
	} else if !c.NextProbe.IsZero() {
		p.Next = "in " + asterisk.Seconds(max(c.NextProbe.Sub(now), 0).Truncate(time.Millisecond*100))
	}
	return p
}

// rttText prints an RTT statistic, a dash when there is none.
func rttText(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return msText(d)
}

// downText is the effective down interval: the backoff's range from R
// ("2 .. 30", qualify-semantics §7), or one interval.
func downText(e qualify.Settings) string {
	if e.DownBackoff {
		return asterisk.Seconds(e.RetryInterval) + " .. " + asterisk.Seconds(e.DownInterval)
	}
	return asterisk.Seconds(e.DownInterval)
}

// policyLines are p's effective settings under their pjsip.conf names.
func policyLines(p *qualify.Policy) []policyLine {
	e := p.Effective()
	return []policyLine{
		{"qualify_frequency", asterisk.Seconds(e.Frequency)},
		{"qualify_timeout", asterisk.Seconds(e.Timeout)},
		{"qualify_failures", itoa(e.Failures)},
		{"qualify_retry_interval", asterisk.Seconds(e.RetryInterval)},
		{"qualify_down_interval", downText(e)},
		{"qualify_successes", itoa(e.Successes)},
		{"qualify_2xx_only", strconv.FormatBool(e.Only2xx)},
		{"qualify_latency_only", strconv.FormatBool(e.LatencyOnly)},
	}
}

func lastText(l engine.LastResult) string {
	if l.OK {
		return "ok " + itoa(l.Code)
	}
	return reasonText(l.Reason, l.Code)
}

func counter(n, of int) string { return itoa(n) + "/" + itoa(of) }
