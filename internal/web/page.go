package web

import (
	_ "embed"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
)

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// pageData is the status page's model.
type pageData struct {
	Version                string
	Now                    string
	AoRCount, ContactCount int
	AoRs                   []pageAoR
	Omitted                int // contacts not shown
}

type pageAoR struct {
	Name      string
	Available bool
	Contacts  []pageContact
}

type pageContact struct {
	URI, Status, Phase, RTT, Last, Next string
	Failures, Successes                 string
	LatencyOnly                         bool
}

// page serves GET /: one table per AoR, for the first AoRs up to
// PageLimit contacts, and the totals.
func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	d := s.pageModel(time.Now())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_ = pageTemplate.Execute(w, d) // a failed write means the client left
}

// pageModel takes one page of AoRs, whole ones up to PageLimit contacts
// (all of the first one's contacts shown only up to PageLimit), and the
// totals from the engine's kept counts: the page loads on every event, and
// a snapshot of the whole table held the engine's lock for a second at a
// million contacts. The totals and the page are taken at two instants.
func (s *Server) pageModel(now time.Time) pageData {
	sum := s.cfg.Engine.Summary()
	d := pageData{Version: s.cfg.Version, Now: now.UTC().Format(time.DateTime), AoRCount: sum.AoRs}
	for _, n := range sum.ByStatus {
		d.ContactCount += n
	}
	as, _ := s.cfg.Engine.AoRsPage(nil, "", s.cfg.PageLimit)
	shown := 0
	for _, a := range as {
		cs := a.Contacts[:min(s.cfg.PageLimit-shown, len(a.Contacts))]
		shown += len(cs)
		pa := pageAoR{Name: a.Name, Available: a.Available, Contacts: make([]pageContact, len(cs))}
		for i := range cs {
			pa.Contacts[i] = newPageContact(&cs[i], now)
		}
		d.AoRs = append(d.AoRs, pa)
	}
	d.Omitted = max(d.ContactCount-shown, 0)
	return d
}

func newPageContact(c *engine.ContactSnapshot, now time.Time) pageContact {
	p := pageContact{URI: c.URI, Status: c.Status.String(), Phase: c.Phase.String(),
		RTT: "-", Last: "never", Next: "-", LatencyOnly: c.LatencyOnly,
		Failures:  counter(c.Failures, c.FailureThreshold),
		Successes: counter(c.Successes, c.SuccessThreshold)}
	if c.RTT > 0 {
		p.RTT = asterisk.Msec(c.RTT)
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

func lastText(l engine.LastResult) string {
	if l.OK {
		return "ok " + itoa(l.Code)
	}
	return reasonText(l.Reason, l.Code)
}

func counter(n, of int) string { return itoa(n) + "/" + itoa(of) }

func itoa(n int) string { return strconv.Itoa(n) }
