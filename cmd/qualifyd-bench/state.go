package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/state"
)

// stateReport is what `qualifyd-bench state` measures: the bytes the
// state keeper writes, extrapolated to a day, against the old rule
// (rewrite the state file at every tick after any applied probe).
type stateReport struct {
	Contacts      int     `json:"contacts"`
	FlipPerMinute float64 `json:"flip_share_per_minute"`
	SpanS         float64 `json:"span_s"`
	Events        uint64  `json:"events"`
	FileBytes     int64   `json:"state_file_bytes"`
	StateWrites   int     `json:"state_writes"`
	MarkWrites    int     `json:"mark_writes"`
	HistoryWrites int     `json:"history_writes"`
	// StatePerDay is the state and mark files' bytes a day; HistoryPerDay
	// the history file's, the same rule before and after.
	StatePerDay   float64 `json:"state_bytes_per_day"`
	HistoryPerDay float64 `json:"history_bytes_per_day"`
	// OldPerDay is the old rule's state file bytes a day, measured over
	// the first BaselineS of the span.
	BaselineS   float64 `json:"baseline_s"`
	OldWrites   int     `json:"old_state_writes"`
	OldPerDay   float64 `json:"old_state_bytes_per_day"`
	Ratio       float64 `json:"old_over_new"`
	WallSeconds float64 `json:"wall_seconds"`
}

// runState drives an engine of N contacts at F = 60 s in simulated time,
// with an instant fake prober whose contacts answer while up, and a share
// of them flipped up or down at random every minute; it ticks a
// state.Keeper every state.Interval whose writes are counted (encoded,
// not put on disk), and beside it the old rule over the first minutes.
func runState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("state", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("contacts", 1_000_000, "contacts, one per AoR")
	flip := fs.Float64("flip", 0, "share of contacts flipped up or down every minute (0.01: 1%)")
	span := fs.Duration("span", 4*time.Hour, "simulated time measured, after the warm-up")
	warmup := fs.Duration("warmup", 3*time.Minute, "simulated time before it: the first verdicts")
	baseline := fs.Duration("baseline", 10*time.Minute, "how much of the span the old rule is measured over")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	wall := time.Now()
	r, err := simulateState(ctx, *n, *flip, *warmup, *span, min(*baseline, *span))
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd-bench state:", err)
		return 1
	}
	r.WallSeconds = time.Since(wall).Seconds()
	out, _ := json.Marshal(r)
	fmt.Fprintln(stdout, string(out))
	return 0
}

// flipProber answers a contact's probe at once: 200 OK while it is up, a
// timeout while it is down. The contact is the number in its AoR's name
// (enginetest.NumberedAoRs).
type flipProber struct{ down []bool }

func (p *flipProber) Start(_ context.Context, t probe.Target, tag uint64, done func(uint64, qualify.Result)) {
	i, _ := strconv.Atoi(t.AoR[1:strings.IndexByte(t.AoR, '@')])
	if p.down[i] {
		done(tag, qualify.Result{Reason: qualify.ReasonTimeout, Detail: "no response"})
		return
	}
	done(tag, qualify.Result{Code: 200, RTT: 12 * time.Millisecond})
}

// byteCounter counts what a keeper would write, encoding it to nowhere.
type byteCounter struct {
	state, history int64
	states, hists  int
	marks          int
	lastSize       int64
}

func (c *byteCounter) write(path string, h state.Header, pages iter.Seq[[]engine.Saved], hists iter.Seq[*engine.History]) (state.Stats, error) {
	st, err := state.Encode(io.Discard, h, pages, hists)
	if strings.HasSuffix(path, state.HistorySuffix) {
		c.history += st.Bytes
		c.hists++
	} else {
		c.state += st.Bytes
		c.states++
		c.lastSize = st.Bytes
	}
	return st, err
}

func (c *byteCounter) mark(string, state.Mark) error {
	c.state += int64(len(state.EncodeMark(state.Mark{})))
	c.marks++
	return nil
}

// simulateState runs the simulation of runState.
func simulateState(ctx context.Context, n int, flip float64, warmup, span, baseline time.Duration) (stateReport, error) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &flipProber{down: make([]bool, n)}
	// A fixed seed: the same arguments simulate the same run.
	rng := rand.New(rand.NewPCG(1, 2))
	e, err := engine.New(engine.Config{Prober: p, Now: func() time.Time { return now }, Rand: rng.Float64})
	if err != nil {
		return stateReport{}, err
	}
	pol := qualify.DefaultPolicy()
	pol.Frequency = 60 * time.Second
	if err := e.Apply(enginetest.NumberedAoRs(n, pol)); err != nil {
		return stateReport{}, err
	}
	sub := e.Subscribe(1)
	defer sub.Close()
	var c byteCounter
	k := state.Keeper{Path: "state", Engine: e, Write: c.write, WriteMark: c.mark}
	d := e.Drive(ctx)
	tick, start := now.Add(state.Interval), now.Add(warmup)
	advance := func(until time.Time, each func()) {
		for now.Before(until) && ctx.Err() == nil {
			if due, ok := d.Next(); ok && due.Before(tick) {
				now = due
				d.StartDue()
				continue
			}
			now = tick
			k.Tick(now)
			each()
			if now.Sub(start)%time.Minute == 0 {
				flipSome(rng, p.down, flip)
			}
			tick = tick.Add(state.Interval)
		}
	}
	advance(start, func() {})
	c = byteCounter{lastSize: c.lastSize}
	seq0, old := e.Seq(), oldRule{e: e}
	advance(start.Add(span), func() {
		if now.Sub(start) <= baseline {
			old.tick(now)
		}
	})
	if err := ctx.Err(); err != nil {
		return stateReport{}, err
	}
	day := float64(24*time.Hour) / float64(span)
	r := stateReport{Contacts: n, FlipPerMinute: flip, SpanS: span.Seconds(), Events: e.Seq() - seq0, FileBytes: c.lastSize,
		StateWrites: c.states, MarkWrites: c.marks, HistoryWrites: c.hists,
		StatePerDay: float64(c.state) * day, HistoryPerDay: float64(c.history) * day,
		BaselineS: baseline.Seconds(), OldWrites: old.writes, OldPerDay: float64(old.bytes) * float64(24*time.Hour) / float64(baseline)}
	r.Ratio = r.OldPerDay / r.StatePerDay
	return r, nil
}

// flipSome flips the given share of down at random.
func flipSome(rng *rand.Rand, down []bool, share float64) {
	for range int(share * float64(len(down))) {
		i := rng.IntN(len(down))
		down[i] = !down[i]
	}
}

// oldRule is the state keeper before Keeper: the whole state file
// rewritten at every tick after which anything changed, events or applied
// probes.
type oldRule struct {
	e      *engine.Engine
	mark   uint64
	writes int
	bytes  int64
}

func (o *oldRule) tick(now time.Time) {
	changes := state.Changes(o.e)
	if changes == o.mark {
		return
	}
	st, _ := state.Encode(io.Discard, state.Header{Written: now, Seq: o.e.Seq()}, state.Pages(o.e), nil)
	o.mark, o.writes, o.bytes = changes, o.writes+1, o.bytes+st.Bytes
}
