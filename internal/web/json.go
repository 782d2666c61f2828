package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// stamp is a time in JSON: RFC 3339 in UTC with milliseconds, or null when
// zero.
type stamp time.Time

// timeFormat is RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t stamp) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + time.Time(t).UTC().Format(timeFormat) + `"`), nil
}

// reasonText is a verdict's reason as the API spells it: "" for a success,
// else asterisk.ReasonText ("timeout", "status 503", ...).
func reasonText(r qualify.Reason, code int) string {
	if r == qualify.ReasonNone {
		return ""
	}
	return asterisk.ReasonText(r, code)
}

type okJSON struct {
	OK bool `json:"ok"`
}

type errorJSON struct {
	Error string `json:"error"`
}

type lastResultJSON struct {
	At     stamp  `json:"at"`
	OK     bool   `json:"ok"`
	Code   int    `json:"code"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

type contactJSON struct {
	AoR              string          `json:"aor"`
	URI              string          `json:"uri"`
	Status           string          `json:"status"`
	Routable         bool            `json:"routable"`
	Phase            string          `json:"phase"`
	RTTUsec          int64           `json:"rtt_usec"`
	Failures         int             `json:"failures"`
	FailureThreshold int             `json:"failure_threshold"`
	Successes        int             `json:"successes"`
	SuccessThreshold int             `json:"success_threshold"`
	LatencyOnly      bool            `json:"latency_only"`
	InFlight         bool            `json:"in_flight"`
	LastResult       *lastResultJSON `json:"last_result"`
	NextProbeAt      stamp           `json:"next_probe_at"`
	statsJSON
}

// statsJSON are a contact's running statistics (engine.Stats), inline in
// its object.
type statsJSON struct {
	SRTTUsec      int64   `json:"rtt_srtt_usec"`
	RTTVarUsec    int64   `json:"rtt_var_usec"`
	RTTMinUsec    int64   `json:"rtt_min_usec"`
	RTTMaxUsec    int64   `json:"rtt_max_usec"`
	LossRatio     float64 `json:"loss_ratio"`
	LossWindow    int     `json:"loss_window"`
	Probes        uint64  `json:"probes"`
	FailuresTotal uint64  `json:"failures_total"`
}

func newStatsJSON(s *engine.Stats) statsJSON {
	return statsJSON{SRTTUsec: s.SRTT.Microseconds(), RTTVarUsec: s.RTTVar.Microseconds(),
		RTTMinUsec: s.RTTMin.Microseconds(), RTTMaxUsec: s.RTTMax.Microseconds(),
		LossRatio: s.Loss, LossWindow: s.LossWindow, Probes: s.Probes, FailuresTotal: s.Failures}
}

func newContactJSON(c *engine.ContactSnapshot) contactJSON {
	j := contactJSON{
		AoR: c.AoR, URI: c.URI, Status: c.Status.String(), Routable: c.Routable,
		Phase: c.Phase.String(), RTTUsec: c.RTT.Microseconds(),
		Failures: c.Failures, FailureThreshold: c.FailureThreshold,
		Successes: c.Successes, SuccessThreshold: c.SuccessThreshold,
		LatencyOnly: c.LatencyOnly, InFlight: c.InFlight, NextProbeAt: stamp(c.NextProbe),
		statsJSON: newStatsJSON(&c.Stats),
	}
	if l := c.Last; !l.At.IsZero() {
		j.LastResult = &lastResultJSON{At: stamp(l.At), OK: l.OK, Code: l.Code,
			Reason: reasonText(l.Reason, l.Code), Detail: l.Detail}
	}
	return j
}

type aorJSON struct {
	Name      string         `json:"name"`
	Available bool           `json:"available"`
	Contacts  []contactJSON  `json:"contacts"`
	Policy    qualify.Report `json:"policy"`
}

func newAoRJSON(a *engine.AoRSnapshot) aorJSON {
	j := aorJSON{Name: a.Name, Available: a.Available, Policy: a.Policy.Report()}
	j.Contacts = make([]contactJSON, len(a.Contacts))
	for i := range a.Contacts {
		j.Contacts[i] = newContactJSON(&a.Contacts[i])
	}
	return j
}

type endpointJSON struct {
	Name      string   `json:"name"`
	Available bool     `json:"available"`
	AoRs      []string `json:"aors"`
}

func newEndpointJSON(e *endpoint.Snapshot) endpointJSON {
	j := endpointJSON{Name: e.Name, Available: e.Available, AoRs: e.AoRs}
	if j.AoRs == nil {
		j.AoRs = []string{}
	}
	return j
}

type probeJSON struct {
	URI     string `json:"uri"`
	OK      bool   `json:"ok"`
	Status  string `json:"status"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	RTTUsec int64  `json:"rtt_usec"`
	Detail  string `json:"detail"`
	Error   string `json:"error,omitempty"`
}

type qualifyJSON struct {
	AoR     string      `json:"aor"`
	Results []probeJSON `json:"results"`
}

func newQualifyJSON(aor string, rs []engine.ContactResult) qualifyJSON {
	j := qualifyJSON{AoR: aor, Results: make([]probeJSON, len(rs))}
	for i, r := range rs {
		p := probeJSON{URI: r.URI, OK: r.OK, Status: r.Status.String(), Code: r.Result.Code,
			Reason: reasonText(r.Reason, r.Result.Code), RTTUsec: r.Result.RTT.Microseconds(), Detail: r.Result.Detail}
		if r.Err != nil {
			p.Error = r.Err.Error()
		}
		j.Results[i] = p
	}
	return j
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do
}

// writeError answers status with {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorJSON{Error: msg})
}

// list streams {"key":[item,...]} and a newline, item by item, so that a
// large table is never held as one JSON document. A write error (the
// client left) stops it; the reply is then cut short.
type list struct {
	bw  *bufio.Writer
	n   int   // items written
	err error // the first write or encoding error
	// Each item is encoded by enc into buf, both reused from item to
	// item: json.Marshal allocated the item's copy as an interface and
	// its result, for every contact (see BenchmarkServeContacts1M).
	buf bytes.Buffer
	enc *json.Encoder
}

// startList answers 200 and opens {"key":[ on w.
func startList(w http.ResponseWriter, key string) *list {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	l := &list{bw: bufio.NewWriterSize(w, 32<<10)}
	l.enc = json.NewEncoder(&l.buf)
	_, l.err = l.bw.WriteString(`{"` + key + `":[`)
	return l
}

// ok reports whether the list is still being written.
func (l *list) ok() bool { return l.err == nil }

// add writes *v, in JSON as json.Marshal has it, as the next item. v is
// a pointer so that passing it allocates nothing.
func (l *list) add(v any) {
	if l.err != nil {
		return
	}
	l.buf.Reset()
	if l.err = l.enc.Encode(v); l.err != nil {
		return // cannot happen with these types
	}
	if l.n > 0 {
		l.bw.WriteByte(',')
	}
	l.n++
	_, l.err = l.bw.Write(bytes.TrimSuffix(l.buf.Bytes(), []byte{'\n'})) // Encode's newline
}

// end closes the list, adding "next":next after it unless next is "", and
// flushes the reply.
func (l *list) end(next string) {
	if l.err != nil {
		return
	}
	l.bw.WriteByte(']')
	if next != "" {
		b, _ := json.Marshal(next)
		l.bw.WriteString(`,"next":`)
		l.bw.Write(b)
	}
	l.bw.WriteString("}\n")
	_ = l.bw.Flush()
}

// quote quotes s for an error message.
func quote(s string) string { return strconv.Quote(s) }
