package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Calls hears the outcome of Asterisk's outgoing calls: an ami sink with
// observe_calls=yes opens a second Manager session of its own (Events:
// call; the Manager user needs read = call), apart from the one that
// pushes, so that no burst of call events ever delays a push, and feeds
// its events to a Legs, whose observations it hands to an observe.Sink.
// Its methods are safe for concurrent use.
type Calls struct {
	name   string
	ami    *AMI
	to     observe.Sink
	notice func(level slog.Level, msg string, attrs ...slog.Attr)

	mu    sync.Mutex
	legs  *Legs
	stats CallStats
}

// CallStats is a Calls' state, for the API and the metrics.
type CallStats struct {
	// Up is whether the session is logged in.
	Up bool
	// LastError is the last connection error, "" before any.
	LastError string
	// Reconnects counts the sessions that failed or ended, each
	// followed by a reconnect after the backoff.
	Reconnects uint64
	// Legs counts what the events became (LegStats).
	Legs LegStats
	// Taken tallies what the observe.Sink did with the observations.
	Taken observe.Tally
}

// pingEvery is how often an idle session is pinged; a session that reads
// nothing, not even the pings' replies, for 3 pings is broken.
const pingEvery = 20 * time.Second

// NewCalls returns the call watcher of ami sink def, reading the
// endpoints of conf and handing observations to to; dial, if set,
// replaces the network dial.
func NewCalls(def *pjsip.Sink, conf *pjsip.Config, to observe.Sink, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	notice func(level slog.Level, msg string, attrs ...slog.Attr)) *Calls {
	a := NewAMI(def, dial)
	a.Events = "call"
	return &Calls{name: def.Name, ami: a, to: to, notice: notice, legs: NewLegs(conf)}
}

// Configure watches the endpoints of conf from now on; the legs followed
// are kept, and end in an observation only if their endpoint is still
// watched.
func (c *Calls) Configure(conf *pjsip.Config) {
	n := NewLegs(conf)
	c.mu.Lock()
	defer c.mu.Unlock()
	n.legs, n.Stats = c.legs.legs, c.legs.Stats
	for id, g := range n.legs {
		if n.aors[g.endpoint] == nil {
			delete(n.legs, id)
		}
	}
	c.legs = n
}

// Stats returns the watcher's state.
func (c *Calls) Stats() CallStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Legs = c.legs.Stats
	return s
}

// Run reads events until ctx is done, reconnecting with the sinks'
// backoff (1 s doubling to 60 s, ±20%), each failure logged once per
// step.
func (c *Calls) Run(ctx context.Context) {
	defer c.ami.close()
	for step := 0; ctx.Err() == nil; {
		err := c.session(ctx, &step)
		c.ami.close()
		if ctx.Err() != nil {
			return
		}
		c.failed(err, step)
		if !sleep(ctx, backoffFor(step, rand.Float64())) {
			return
		}
		step++
	}
}

// session logs in and reads events until the connection fails.
func (c *Calls) session(ctx context.Context, step *int) error {
	if err := c.ami.connect(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.legs.Reset()
	c.stats.Up = true
	c.mu.Unlock()
	if *step > 0 {
		c.log(slog.LevelInfo, "sink "+c.name+": calls: connected")
	}
	*step = 0
	done := make(chan struct{})
	defer close(done)
	go ping(c.ami.conn, c.ami.Timeout, done)
	var batch []observe.Observation
	for {
		c.ami.conn.SetReadDeadline(time.Now().Add(3 * pingEvery))
		m, err := c.ami.message()
		if err != nil {
			return fmt.Errorf("ami %s: calls: %w", c.ami.Address, err)
		}
		batch = c.feed(batch[:0], m)
	}
}

// feed hands the observations of message m to the sink. An event of a
// followed leg that could not be read is counted as a malformed
// observation where the sink counts what its sources refused.
func (c *Calls) feed(batch []observe.Observation, m map[string]string) []observe.Observation {
	c.mu.Lock()
	dropped := c.legs.Stats.Dropped
	batch = c.legs.Event(batch, time.Now(), m)
	dropped = c.legs.Stats.Dropped - dropped
	c.mu.Unlock()
	if r, ok := c.to.(observe.Refuser); ok && dropped > 0 {
		var t observe.Tally
		t.Dropped[observe.DropMalformed] = int(dropped)
		r.Refused(t)
	}
	if len(batch) == 0 {
		return batch
	}
	t := c.to.Observe(batch)
	c.mu.Lock()
	c.stats.Taken.Add(t)
	c.mu.Unlock()
	return batch
}

// ping sends a Ping over conn every pingEvery, each write bounded by
// timeout, until done is closed, so that a session that hears no call
// still reads something and a dead one is found within 3 pings. A
// failed write ends the pinging; the read fails soon after.
func ping(conn net.Conn, timeout time.Duration, done <-chan struct{}) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			conn.SetWriteDeadline(time.Now().Add(timeout))
			if _, err := conn.Write([]byte("Action: Ping\r\nActionID: qualifyd-calls-ping\r\n\r\n")); err != nil {
				return
			}
		}
	}
}

// failed records and logs a failure: once per backoff step.
func (c *Calls) failed(err error, step int) {
	if err == nil {
		err = errors.New("session ended")
	}
	c.mu.Lock()
	c.stats.Up, c.stats.LastError = false, err.Error()
	c.stats.Reconnects++
	c.mu.Unlock()
	c.log(slog.LevelWarn, "sink "+c.name+": "+err.Error(), slog.Int("retry", step+1))
}

// log logs through notice, if set.
func (c *Calls) log(level slog.Level, msg string, attrs ...slog.Attr) {
	if c.notice != nil {
		c.notice(level, msg, attrs...)
	}
}
