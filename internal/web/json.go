package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// The API's objects are internal/api's types, built here from the
// engine's and the endpoint table's snapshots.

// reasonText is a verdict's reason as the API spells it: "" for a success,
// else asterisk.ReasonText ("timeout", "status 503", ...).
func reasonText(r qualify.Reason, code int) string {
	if r == qualify.ReasonNone {
		return ""
	}
	return asterisk.ReasonText(r, code)
}

func newStats(s *engine.Stats) api.Stats {
	return api.Stats{SRTTUsec: s.SRTT.Microseconds(), RTTVarUsec: s.RTTVar.Microseconds(),
		RTTMinUsec: s.RTTMin.Microseconds(), RTTMaxUsec: s.RTTMax.Microseconds(),
		LossRatio: s.Loss, LossWindow: s.LossWindow, Probes: s.Probes, FailuresTotal: s.Failures}
}

func newContact(c *engine.ContactSnapshot) api.Contact {
	j := api.Contact{
		AoR: c.AoR, URI: c.URI, Status: c.Status.String(), Routable: c.Routable,
		Phase: c.Phase.String(), RTTUsec: c.RTT.Microseconds(),
		Failures: c.Failures, FailureThreshold: c.FailureThreshold,
		Successes: c.Successes, SuccessThreshold: c.SuccessThreshold,
		LatencyOnly: c.LatencyOnly, InFlight: c.InFlight, NextProbeAt: api.At(c.NextProbe),
		NotProbedHere: c.Elsewhere, Stats: newStats(&c.Stats),
	}
	if l := c.Last; !l.At.IsZero() {
		j.LastResult = &api.LastResult{At: api.At(l.At), OK: l.OK, Code: l.Code,
			Reason: reasonText(l.Reason, l.Code), Detail: l.Detail}
	}
	return j
}

func newAoR(a *engine.AoRSnapshot) api.AoR {
	j := api.AoR{Name: a.Name, Available: a.Available, Policy: a.Policy.Report()}
	j.Contacts = make([]api.Contact, len(a.Contacts))
	for i := range a.Contacts {
		j.Contacts[i] = newContact(&a.Contacts[i])
	}
	return j
}

// contactJSON is c's object with, in cluster mode, the cluster's status
// of it and each vantage's vote.
func (s *Server) contactJSON(c *engine.ContactSnapshot) api.Contact {
	j := newContact(c)
	s.addVotes(&j)
	return j
}

// aorJSON is a's object with, in cluster mode, its contacts' votes.
func (s *Server) aorJSON(a *engine.AoRSnapshot) api.AoR {
	j := newAoR(a)
	for i := range j.Contacts {
		s.addVotes(&j.Contacts[i])
	}
	return j
}

// addVotes sets j's cluster status and votes; nothing outside cluster
// mode.
func (s *Server) addVotes(j *api.Contact) {
	j.ClusterStatus, j.Votes = s.votes(j.AoR, j.URI)
}

// votes returns the cluster's status of the contact aor/uri and each
// live vantage's vote, from one call of the Votes hook; "" and nil
// outside cluster mode or for a contact the cluster does not know.
func (s *Server) votes(aor, uri string) (string, []api.Vote) {
	if s.cfg.Votes == nil {
		return "", nil
	}
	st, votes, ok := s.cfg.Votes(aor, uri)
	if !ok {
		return "", nil
	}
	return st.String(), votes
}

func newEndpoint(e *endpoint.Snapshot) api.Endpoint {
	j := api.Endpoint{Name: e.Name, Available: e.Available, AoRs: e.AoRs}
	if j.AoRs == nil {
		j.AoRs = []string{}
	}
	return j
}

func newQualify(aor string, rs []engine.ContactResult) api.Qualify {
	j := api.Qualify{AoR: aor, Results: make([]api.Probe, len(rs))}
	for i, r := range rs {
		p := api.Probe{URI: r.URI, OK: r.OK, Status: r.Status.String(), Code: r.Result.Code,
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
	writeJSON(w, status, api.ErrorReply{Error: msg})
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
