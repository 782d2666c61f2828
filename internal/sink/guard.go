package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Guard is the fail-open path of a method=maintenance sink, run beside
// Asterisk by `qualifyd guard`: Asterisk keeps an endpoint in maintenance
// until told otherwise, so when qualifyd is killed, stalls or loses its
// way to the Manager, something else must take it out. Every Interval the
// guard reads the heartbeat's deadline (qualifyd/failopen_at); while it
// is past (or missing), it turns maintenance off for each of the sink's
// endpoints that Asterisk holds in maintenance, and logs it. A fresh
// heartbeat leaves maintenance to qualifyd, which reads the set back at
// every beat and puts back what the guard released.
type Guard struct {
	// Name is the sink's name, for the log.
	Name string
	// AMI is the Manager client (NewAMI of the sink's definition).
	AMI *AMI
	// Endpoints returns the endpoints the sink may put in maintenance;
	// the guard calls it at the start of each stale episode, so that it
	// acts on the configuration as it is then. Endpoints in maintenance
	// that it does not list (an operator's own) are left alone.
	Endpoints func() (map[string]bool, error)
	// Interval is the time between two reads of the heartbeat.
	Interval time.Duration
	// Notice, if set, logs what the guard does.
	Notice func(level slog.Level, msg string, attrs ...slog.Attr)

	managed map[string]bool // the endpoints of the current episode
	stale   bool            // in a stale episode
	failing bool            // the last round failed
}

// SinkEndpoints returns the endpoints sink def (ami, method=maintenance)
// puts in maintenance over conf.
func SinkEndpoints(def *pjsip.Sink, conf *pjsip.Config) map[string]bool {
	out := map[string]bool{}
	for k := range newPlan(def, conf).deps {
		out[k.Name] = true
	}
	return out
}

// Run checks at once, then every Interval, until ctx is done.
func (g *Guard) Run(ctx context.Context) {
	defer g.AMI.close()
	t := time.NewTicker(g.Interval)
	defer t.Stop()
	for {
		g.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check runs one round; a failure closes the session (the next round
// reconnects) and is logged once until a round succeeds.
func (g *Guard) check(ctx context.Context) {
	err := g.round(ctx)
	if err == nil {
		g.failing = false
		return
	}
	g.AMI.close()
	if ctx.Err() == nil && !g.failing {
		g.notice(slog.LevelWarn, err.Error())
	}
	g.failing = true
}

// round reads the deadline and, when it is past, releases the sink's
// endpoints in maintenance.
func (g *Guard) round(ctx context.Context) error {
	if g.AMI.conn == nil {
		if err := g.AMI.connect(ctx); err != nil {
			return err
		}
		if g.failing {
			g.notice(slog.LevelInfo, "connected")
		}
	}
	until, ok, err := g.deadline()
	if err != nil {
		return err
	}
	now := time.Now()
	if !pastDeadline(now, until, ok) {
		if g.stale {
			g.notice(slog.LevelInfo, "the heartbeat is fresh again: qualifyd steers maintenance")
		}
		g.stale = false
		return nil
	}
	return g.release(now, until, ok)
}

// pastDeadline reports whether a heartbeat deadline until (unix seconds; ok
// false when there is none) is past at now: as docs/routers.md's dial plan
// compares ${EPOCH} > failopen_at.
func pastDeadline(now time.Time, until int64, ok bool) bool {
	return !ok || now.Unix() > until
}

// deadline reads qualifyd/failopen_at: ok is false when Asterisk has
// none (or not a number: a deadline nobody can read vouches for nothing).
func (g *Guard) deadline() (until int64, ok bool, err error) {
	events, err := g.AMI.list("DBGet", "Family", "qualifyd", "Key", keyFailOpenAt)
	var rej *Rejected
	if errors.As(err, &rej) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	for _, e := range events {
		if e["Event"] == "DBGetResponse" {
			until, err := strconv.ParseInt(e["Val"], 10, 64)
			return until, err == nil, nil
		}
	}
	return 0, false, nil
}

// release turns maintenance off for the sink's endpoints Asterisk holds
// in maintenance, the actions pipelined as a release's, and logs the
// episode's start and every release.
func (g *Guard) release(now time.Time, until int64, ok bool) error {
	if !g.stale {
		g.refresh()
	}
	in, err := g.AMI.inMaintenance()
	if err != nil {
		return err
	}
	names := releasable(in, g.managed)
	objs, errs := make([]Object, len(names)), make([]error, len(names))
	for i, name := range names {
		objs[i] = Object{Key: Key{Kind: KindEndpoint, Name: name}, Level: Up}
	}
	g.AMI.batch(objs, errs, maintenanceRequest) // maintenance off, pipelined
	var done []string
	for i, name := range names {
		var rej *Rejected
		if errors.As(errs[i], &rej) {
			g.notice(slog.LevelWarn, "endpoint "+name+": "+rej.Error())
			continue
		}
		if errs[i] != nil {
			return errs[i]
		}
		done = append(done, name)
	}
	if !g.stale || len(done) > 0 {
		g.notice(slog.LevelWarn, staleLine(now, until, ok, done))
	}
	g.stale = true
	return nil
}

// refresh reads the sink's endpoints for a new episode, keeping the last
// ones when the configuration cannot be read.
func (g *Guard) refresh() {
	m, err := g.Endpoints()
	if err != nil {
		g.notice(slog.LevelError, "configuration: "+pjsip.Brief(err)+": keeping the endpoints read before")
		return
	}
	g.managed = m
}

// releasable returns, sorted, the endpoints in maintenance (in) that the
// sink manages.
func releasable(in, managed map[string]bool) []string {
	var out []string
	for name := range in {
		if managed[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// staleLine says why the guard failed open and what it released: the
// count, and the first named endpoints of done (sorted).
func staleLine(now time.Time, until int64, ok bool, done []string) string {
	why := "no heartbeat deadline (qualifyd/failopen_at) in astdb"
	if ok {
		why = fmt.Sprintf("the heartbeat is stale: failopen_at %d passed %d s ago", until, now.Unix()-until)
	}
	line := fmt.Sprintf("%s: maintenance off for %d %s", why, len(done), plural(len(done), "endpoint"))
	if len(done) > 0 {
		line += ": " + firstFew(done, named)
	}
	return line
}

// named is how many endpoints a guard's line names at most: a release of
// 500 trunks is one short line, not 5 KB.
const named = 10

// firstFew joins the first n names, and says how many more there are.
func firstFew(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func (g *Guard) notice(level slog.Level, msg string) {
	if g.Notice != nil {
		g.Notice(level, "guard: sink "+g.Name+": "+msg)
	}
}
