package main

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
)

// eventLog prints the daemon's log: the engine's edges as Asterisk's lines,
// endpoint availability, and the daemon's own notices. Text lines carry a
// timestamp; the JSON form (log/slog) carries the same events as fields.
// Safe for concurrent use. Lines are written as they come, or, between
// hold and release, in one write per burst (issue 7: a million contacts
// going Unreachable log a million lines within a minute).
type eventLog struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte // lines not written yet
	held bool
	json *slog.Logger // nil for text
	now  func() time.Time
}

// maxHeld is how much a held log buffers before it writes anyway.
const maxHeld = 64 << 10

func newEventLog(w io.Writer, format string) (*eventLog, error) {
	l := &eventLog{w: w, now: time.Now}
	switch format {
	case "text":
	case "json":
		l.json = slog.New(slog.NewJSONHandler(l, nil))
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return l, nil
}

// event logs one engine event, if it prints a line.
func (l *eventLog) event(ev engine.Event) {
	line, ok := asterisk.Line(ev)
	if !ok {
		return
	}
	if l.json != nil {
		l.json.LogAttrs(nil, slog.LevelInfo, line, eventAttrs(ev)...)
		return
	}
	l.text(ev.Time, line)
}

// endpoint logs an endpoint's change of availability.
func (l *eventLog) endpoint(at time.Time, name string, available bool) {
	line := asterisk.EndpointLine(name, available)
	if l.json != nil {
		l.json.LogAttrs(nil, slog.LevelInfo, line, slog.String("event", "endpoint"),
			slog.String("endpoint", name), slog.Bool("available", available))
		return
	}
	l.text(at, line)
}

// notice logs one of the daemon's own messages (startup, reload, errors).
func (l *eventLog) notice(level slog.Level, msg string, attrs ...slog.Attr) {
	if l.json != nil {
		l.json.LogAttrs(nil, level, msg, attrs...)
		return
	}
	for _, a := range attrs {
		msg += " " + a.Key + "=" + a.Value.String()
	}
	l.text(l.now(), "qualifyd: "+msg)
}

// text logs line with the timestamp at.
func (l *eventLog) text(at time.Time, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, '[')
	l.buf = at.Local().AppendFormat(l.buf, "2006-01-02 15:04:05.000")
	l.buf = append(l.buf, "] "...)
	l.buf = append(l.buf, line...)
	l.buf = append(l.buf, '\n')
	l.written()
}

// Write logs p, one record of the JSON handler.
func (l *eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	l.written()
	return len(p), nil
}

// written writes the buffer out unless the log is held and has room.
// Called with mu held. A failed write (a closed stdout) loses the lines,
// as an unbuffered write would.
func (l *eventLog) written() {
	if l.held && len(l.buf) < maxHeld {
		return
	}
	_, _ = l.w.Write(l.buf)
	l.buf = l.buf[:0]
}

// hold buffers the lines logged until release, which writes them at once.
func (l *eventLog) hold() {
	l.mu.Lock()
	l.held = true
	l.mu.Unlock()
}

// release writes the lines held since hold.
func (l *eventLog) release() {
	l.mu.Lock()
	l.held = false
	l.written()
	l.mu.Unlock()
}

// eventAttrs are the JSON fields of one contact event.
func eventAttrs(ev engine.Event) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("event", ev.Kind.String()), slog.Uint64("seq", ev.Seq),
		slog.String("aor", ev.AoR), slog.String("uri", ev.URI),
		slog.String("from", ev.From.String()), slog.String("to", ev.To.String()),
		slog.Bool("routable", ev.Routable),
		slog.Int("failures", ev.Failures), slog.Int("failure_threshold", ev.FailureThreshold),
		slog.Int("successes", ev.Successes), slog.Int("success_threshold", ev.SuccessThreshold),
		slog.Int64("rtt_usec", ev.Result.RTT.Microseconds()),
	}
	if ev.Reason != 0 {
		attrs = append(attrs, slog.String("reason", asterisk.ReasonText(ev.Reason, ev.Result.Code)))
	}
	if !ev.Next.IsZero() {
		attrs = append(attrs, slog.Time("next_probe_at", ev.Next))
	}
	return attrs
}
