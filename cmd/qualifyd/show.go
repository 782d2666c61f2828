package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// runShow is `qualifyd show contacts|aors|endpoints|sinks [NAME]|history
// AOR|cluster`: Asterisk's `pjsip show contacts` / `pjsip show aors`
// tables from a running daemon, with the failure counters and next probe
// time appended, the endpoints' availability with their AoRs, the sinks'
// state (one sink's objects with NAME), an AoR's status changes, and the
// cluster. `show contacts --stats` appends the contacts' running
// statistics; in cluster mode `show contacts` appends the cluster's
// status and the votes.
func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var stats, pending bool
	c, pos, code := parseClient("show", "contacts [--stats]|aors|endpoints|sinks [NAME [--pending]]|history AOR|cluster [--http ADDR]", args, stderr, func(pos []string) bool {
		switch {
		case len(pos) == 2:
			return (pos[0] == "history" && !pending || pos[0] == "sinks") && !stats
		case len(pos) != 1 || pending:
			return false
		}
		return pos[0] == "contacts" || !stats && (pos[0] == "aors" || pos[0] == "endpoints" || pos[0] == "sinks" || pos[0] == "cluster")
	}, func(fs *flag.FlagSet) {
		fs.BoolVar(&pending, "pending", false, "show sinks NAME: only the objects the router has not taken")
		fs.BoolVar(&stats, "stats", false, "show contacts: add the RTT statistics (SRTT, RTTVAR, min, max), the loss over the last 100 probes and the probe and failure totals")
	})
	if c == nil {
		return code
	}
	var err error
	switch {
	case stats:
		err = showStats(ctx, c, stdout, time.Now())
	case pos[0] == "history":
		err = showHistory(ctx, c, pos[1], stdout)
	case pos[0] == "cluster":
		err = showCluster(ctx, c, stdout, time.Now())
	case len(pos) == 2:
		err = showSink(ctx, c, pos[1], pending, stdout, time.Now())
	default:
		err = show(ctx, c, pos[0], stdout, time.Now())
	}
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd show:", err)
		return 1
	}
	return 0
}

func show(ctx context.Context, c *apiClient, what string, w io.Writer, now time.Time) error {
	var body struct {
		AoRs      []api.AoR      `json:"aors"`
		Contacts  []api.Contact  `json:"contacts"`
		Endpoints []api.Endpoint `json:"endpoints"`
		Sinks     []api.Sink     `json:"sinks"`
		Panic     *api.Panic     `json:"panic"`
	}
	if err := c.do(ctx, "GET", "/api/v1/"+what, &body); err != nil {
		return err
	}
	switch what {
	case "aors":
		printAoRs(w, body.AoRs, now)
	case "endpoints":
		printEndpoints(w, body.Endpoints)
	case "sinks":
		printSinks(w, body.Sinks, now)
		printPanic(w, body.Panic, now)
	default:
		printContacts(w, body.Contacts, now)
	}
	return nil
}

const contactHeader = "  Contact:  <Aor/ContactUri%s> <Hash....> <Status> <RTT(ms)..>  <Fail> <Next>\n"

// nameWidth is the width of the Aor/ContactUri column: at least Asterisk's
// 46, wider for long URIs.
func nameWidth(cs []api.Contact) int {
	w := 46
	for _, c := range cs {
		w = max(w, len(c.AoR)+1+len(c.URI))
	}
	return w
}

func printContacts(w io.Writer, cs []api.Contact, now time.Time) {
	if clusterMode(cs) {
		printWide(w, cs, now, clusterHeader, clusterColumns)
		return
	}
	width := nameWidth(cs)
	fmt.Fprintf(w, "\n"+contactHeader, strings.Repeat(".", width-14))
	fmt.Fprintln(w, strings.Repeat("=", width+50))
	fmt.Fprintln(w)
	for _, c := range cs {
		fmt.Fprintln(w, contactRow("  Contact:  ", c, width, now))
	}
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(cs))
}

func printAoRs(w io.Writer, as []api.AoR, now time.Time) {
	var all []api.Contact
	for _, a := range as {
		all = append(all, a.Contacts...)
	}
	width := nameWidth(all)
	fmt.Fprintf(w, "\n      Aor:  <Aor%s>  <Available>\n", strings.Repeat(".", width-3))
	fmt.Fprintf(w, "  "+contactHeader, strings.Repeat(".", width-14))
	fmt.Fprintln(w, strings.Repeat("=", width+52))
	for _, a := range as {
		fmt.Fprintf(w, "\n      Aor:  %-*s  %s\n", width, a.Name, yesNo(a.Available))
		for _, c := range a.Contacts {
			fmt.Fprintln(w, contactRow("    Contact:  ", c, width, now))
		}
	}
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(as))
}

// printEndpoints prints one line per endpoint: its name, availability
// (the routing truth) and AoRs, in the voice of the other tables.
func printEndpoints(w io.Writer, es []api.Endpoint) {
	width := 46
	for _, e := range es {
		width = max(width, len(e.Name))
	}
	fmt.Fprintf(w, "\n Endpoint:  <Endpoint%s>  <Available>  <AoRs...>\n", strings.Repeat(".", width-8))
	fmt.Fprintln(w, strings.Repeat("=", width+40))
	fmt.Fprintln(w)
	for _, e := range es {
		line := fmt.Sprintf(" Endpoint:  %-*s  %-11s  %s", width, e.Name, yesNo(e.Available), strings.Join(e.AoRs, ","))
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(es))
}

// printSinks prints one line per sink, in configuration order: its
// name, driver, whether the router is connected, the objects it keeps
// and those not yet confirmed, its pushes by result, how long ago the
// last one succeeded, and the router's last error.
func printSinks(w io.Writer, ss []api.Sink, now time.Time) {
	sinkTable(w, ss, now)
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(ss))
}

// printPanic says so while qualifyd panics, or while downs wait for a
// panic (the lower mark).
func printPanic(w io.Writer, p *api.Panic, now time.Time) {
	switch {
	case p != nil && p.Active:
		fmt.Fprintf(w, "PANIC for %s: %d of %d destinations are failing, %d down (more than %d%%): the sinks push only ups\n\n",
			ago(p.Since, now), p.Failing, p.Destinations, p.Down, p.Threshold)
	case p != nil && p.Waiting:
		fmt.Fprintf(w, "WAITING: %d of %d destinations began failing within %gs (more than %d%%; %d failing, %d down): a new down is held up to %gs in case a panic is coming\n\n",
			p.Recent, p.Destinations, p.HoldSeconds, p.HoldThreshold, p.Failing, p.Down, p.HoldSeconds)
	}
}

// sinkTable is printSinks' table without its count.
func sinkTable(w io.Writer, ss []api.Sink, now time.Time) {
	width := 20
	for _, s := range ss {
		width = max(width, len(s.Name))
	}
	head := fmt.Sprintf("     Sink:  <Sink%s>  <Driver>  <Up>  <Objects>  <Pending>  <OK/Error/Dropped>  <Last ok>  <Last error>",
		strings.Repeat(".", width-6))
	fmt.Fprintf(w, "\n%s\n%s\n\n", head, strings.Repeat("=", len(head)))
	for _, s := range ss {
		up := yesNoShort(s.Up)
		pushes := fmt.Sprintf("%d/%d/%d", s.Pushes.OK, s.Pushes.Error, s.Pushes.Dropped)
		line := fmt.Sprintf("     Sink:  %-*s  %-8s  %-4s  %9d  %9d  %-18s  %9s  %s", width, s.Name, s.Driver, up,
			s.Objects, s.Pending, pushes, ago(s.LastSuccess, now), s.LastError)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// showSink prints one sink's state, then each of its objects (only the
// pending ones with pending) with the level qualifyd wants and the one
// the router last confirmed.
func showSink(ctx context.Context, c *apiClient, name string, pending bool, w io.Writer, now time.Time) error {
	path := "/api/v1/sinks/" + url.PathEscape(name)
	if pending {
		path += "?pending=1"
	}
	var d api.SinkDetail
	if err := c.do(ctx, "GET", path, &d); err != nil {
		return err
	}
	sinkTable(w, []api.Sink{d.Sink}, now)
	width := 46
	for _, o := range d.Items {
		width = max(width, len(objectName(o)))
	}
	head := fmt.Sprintf("   Object:  <Kind....>  <Name%s>  <Wanted>  <Router>  <Pending>", strings.Repeat(".", width-6))
	fmt.Fprintf(w, "\n%s\n%s\n\n", head, strings.Repeat("=", len(head)))
	for _, o := range d.Items {
		fmt.Fprintf(w, "   Object:  %-10s  %-*s  %-8s  %-8s  %s\n", o.Kind, width, objectName(o), o.Wanted, o.Confirmed, yesNoShort(o.Pending))
	}
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(d.Items))
	return nil
}

// objectName is a sink object's name, a contact's as AOR/URI.
func objectName(o api.SinkObject) string {
	if o.URI != "" {
		return o.Name + "/" + o.URI
	}
	return o.Name
}

func yesNoShort(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// showHistory prints an AoR's history: its probes and failures over the
// time it covers, then its status changes, newest first.
func showHistory(ctx context.Context, c *apiClient, aor string, w io.Writer) error {
	var h api.History
	if err := c.do(ctx, "GET", "/api/v1/aors/"+url.PathEscape(aor)+"/history", &h); err != nil {
		return err
	}
	probes, failures := 0, 0
	for _, b := range h.Buckets {
		probes, failures = probes+b.Probes, failures+b.Failures
	}
	fmt.Fprintf(w, "\n  History:  %s\n", h.AoR)
	if len(h.Buckets) > 0 {
		from := h.Buckets[0].Start.UTC().Format(time.DateTime)
		loss := "-"
		if probes > 0 {
			loss = strconv.FormatFloat(100*float64(failures)/float64(probes), 'f', 1, 64) + "%"
		}
		fmt.Fprintf(w, "   Probes:  %d since %s UTC (%d buckets of %gs), %d failed (%s)\n",
			probes, from, len(h.Buckets), h.WidthSeconds, failures, loss)
	}
	width := 46
	for _, ch := range h.Changes {
		width = max(width, len(ch.URI))
	}
	head := fmt.Sprintf("   Change:  <Time (UTC)...........>  <Contact%s>  <From......>  <To........>  <Reason>", strings.Repeat(".", width-9))
	fmt.Fprintf(w, "\n%s\n%s\n\n", head, strings.Repeat("=", len(head)))
	for i := len(h.Changes) - 1; i >= 0; i-- {
		ch := h.Changes[i]
		reason := ch.Reason
		if ch.Detail != "" {
			reason += " (" + ch.Detail + ")"
		}
		line := fmt.Sprintf("   Change:  %-23s  %-*s  %-12s  %-12s  %s", ch.Time.UTC().Format("2006-01-02 15:04:05.000"), width, ch.URI,
			ch.From, ch.To, reason)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(h.Changes))
	return nil
}

// ago is how long before now t was, "-" for never.
func ago(t api.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return max(now.Sub(t.Time), 0).Round(100 * time.Millisecond).String()
}

// contactRow is one contact line: Asterisk's columns (hash of the URI,
// short status, RTT or nan), then failures/N and the next probe.
func contactRow(prefix string, c api.Contact, width int, now time.Time) string {
	rtt := "nan" // as Asterisk's printf of NAN
	if c.Status == "Reachable" {
		rtt = strconv.FormatFloat(float64(c.RTTUsec)/1000, 'f', 3, 64)
	}
	sum := md5.Sum([]byte(c.URI))
	fail := fmt.Sprintf("%d/%d", c.Failures, c.FailureThreshold)
	return fmt.Sprintf("%s%-*s %-10.10s %-7.7s %11s  %-6s %s", prefix, width, c.AoR+"/"+c.URI,
		hex.EncodeToString(sum[:]), shortStatus(c), rtt, fail, nextIn(c.NextProbeAt, now))
}

// shortStatus is Asterisk's short status label; latency-only contacts that
// failed show as Unavail* (still routable), draining ones as Drain
// (qualify-semantics §11.4; Drain* when latency-only, still routable).
func shortStatus(c api.Contact) string {
	switch {
	case c.Phase == "draining" && c.Routable:
		return "Drain*"
	case c.Phase == "draining":
		return "Drain"
	case c.Status == "Unreachable" && c.Routable:
		return "Unavail*"
	}
	return shortLabel(c.Status)
}

// shortLabel is Asterisk's short label of a status, "-" for none.
func shortLabel(status string) string {
	switch status {
	case "Reachable":
		return "Avail"
	case "Unreachable":
		return "Unavail"
	case "NonQualified":
		return "NonQual"
	case "":
		return "-"
	}
	return status
}

func nextIn(t api.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%.1fs", max(t.Sub(now), 0).Seconds())
}

func yesNo(b bool) string {
	if b {
		return "Available"
	}
	return "Unavailable"
}

// statsHeader heads the columns --stats appends.
const statsHeader = " <SRTT(ms)> <RTTVAR(ms)> <Min(ms)..> <Max(ms)..> <Loss> <Probes> <Failed>"

// showStats prints the contacts table with the statistics' columns after
// Asterisk's.
func showStats(ctx context.Context, c *apiClient, w io.Writer, now time.Time) error {
	var body struct {
		Contacts []api.Contact `json:"contacts"`
	}
	if err := c.do(ctx, "GET", "/api/v1/contacts", &body); err != nil {
		return err
	}
	cs := body.Contacts
	if clusterMode(cs) {
		printWide(w, cs, now, statsHeader+clusterHeader, func(c *api.Contact) string {
			return statsColumns(&c.Stats) + clusterColumns(c)
		})
		return nil
	}
	printWide(w, cs, now, statsHeader, func(c *api.Contact) string { return statsColumns(&c.Stats) })
	return nil
}

// printWide prints the contacts table with the columns extra gives each
// contact, headed by head, after Asterisk's.
func printWide(w io.Writer, cs []api.Contact, now time.Time, head string, extra func(*api.Contact) string) {
	width := nameWidth(cs)
	rows := make([]string, len(cs))
	base := 0
	for i := range cs {
		rows[i] = contactRow("  Contact:  ", cs[i], width, now)
		base = max(base, len(rows[i]))
	}
	first := fmt.Sprintf(strings.TrimSuffix(contactHeader, "\n"), strings.Repeat(".", width-14))
	base = max(base, len(first))
	fmt.Fprintf(w, "\n%-*s%s\n", base, first, head)
	fmt.Fprintln(w, strings.Repeat("=", base+len(head)))
	fmt.Fprintln(w)
	for i, row := range rows {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-*s%s", base, row, extra(&cs[i])), " "))
	}
	fmt.Fprintf(w, "\nObjects found: %d\n\n", len(cs))
}

// statsColumns are one contact's statistics in statsHeader's columns: "-"
// for the RTTs before a success and for the loss before a probe.
func statsColumns(s *api.Stats) string {
	rtt := func(us int64) string {
		if s.RTTMaxUsec == 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(us)/1000, 'f', 3, 64)
	}
	loss := "-"
	if s.LossWindow > 0 {
		loss = strconv.FormatFloat(s.LossRatio*100, 'f', 0, 64) + "%"
	}
	return fmt.Sprintf(" %10s %12s %11s %11s %6s %8d %8d", rtt(s.SRTTUsec), rtt(s.RTTVarUsec), rtt(s.RTTMinUsec), rtt(s.RTTMaxUsec),
		loss, s.Probes, s.FailuresTotal)
}
