package daemon

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
)

// Log prints the daemon's log: the engine's edges as Asterisk's lines, the
// endpoint lines, and the daemon's own notices. Text lines carry a
// timestamp; the JSON form (log/slog) carries the same events as fields.
// Safe for concurrent use. A line is appended to a bounded buffer that
// one goroutine writes out, in one write for all the lines waiting: a
// million contacts going Unreachable log a million lines within a
// minute. Logging never waits for the writer: when the buffer is full,
// lines are dropped and counted (Dropped), and the writer's next write
// says how many.
type Log struct {
	out   *logWriter
	json  *slog.Logger                         // nil for text
	stamp func(dst []byte, t time.Time) []byte // a text line's timestamp
	now   func() time.Time
}

// NewLog returns a log writing to w in format "text" (Asterisk's lines) or
// "json", and starts its writer; Close stops it. stamp formats a text
// line's timestamp; nil means local wall-clock time with milliseconds.
func NewLog(w io.Writer, format string, stamp func(dst []byte, t time.Time) []byte) (*Log, error) {
	return newLog(w, format, stamp, defaultLogBuffer)
}

// newLog is NewLog with a buffer of limit bytes.
func newLog(w io.Writer, format string, stamp func(dst []byte, t time.Time) []byte, limit int) (*Log, error) {
	if stamp == nil {
		stamp = wallStamp
	}
	if format != "text" && format != "" && format != "json" {
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	l := &Log{now: time.Now, stamp: stamp, out: newLogWriter(w, limit)}
	if format == "json" {
		l.json = slog.New(slog.NewJSONHandler(l.out, nil))
	}
	l.out.notice = l.droppedLine
	return l, nil
}

// droppedLine appends to dst the notice that n lines were dropped.
func (l *Log) droppedLine(dst []byte, n uint64) []byte {
	msg := fmt.Sprintf("%d log lines were dropped: the log's reader fell behind (qualifyd_log_lines_dropped_total)", n)
	if l.json == nil {
		return l.appendText(dst, l.now(), "qualifyd: "+msg)
	}
	b := bytes.NewBuffer(dst)
	slog.New(slog.NewJSONHandler(b, nil)).LogAttrs(nil, slog.LevelWarn, msg)
	return b.Bytes()
}

// Dropped returns how many lines were dropped because the buffer was
// full (the writer fell behind) or the log was closed.
func (l *Log) Dropped() uint64 { return l.out.dropped.Load() }

// Unreported returns how many of the dropped lines no notice in the
// log counts yet: after Close, those the log's reader never heard of
// (its writer stalled, or lines logged after Close).
func (l *Log) Unreported() uint64 { return l.out.unreported() }

// Sync waits until the lines logged before it are written, at most
// bound, and reports whether they were.
func (l *Log) Sync(bound time.Duration) bool { return l.out.sync(bound) }

// Close stops the log: the lines logged before it are given at most
// bound to be written, those logged after are dropped. It reports
// whether every line was written; a writer still blocked after bound is
// abandoned, so that a stdout nobody reads never holds up an exit.
// Close is idempotent.
func (l *Log) Close(bound time.Duration) bool { return l.out.close(bound) }

// wallStamp is the default timestamp of a text line.
func wallStamp(dst []byte, t time.Time) []byte {
	return t.Local().AppendFormat(dst, "2006-01-02 15:04:05.000")
}

// event logs one engine event, if it prints a line.
func (l *Log) event(ev engine.Event) {
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

// endpoint logs a change of the log's view of an endpoint, caused by the
// contact event ev.
func (l *Log) endpoint(c endpoint.LogChange, ev engine.Event) {
	line := asterisk.EndpointLine(c.Name, c.Reachable)
	if l.json != nil {
		l.json.LogAttrs(nil, slog.LevelInfo, line, endpointAttrs(c, ev)...)
		return
	}
	l.text(ev.Time, line)
}

// Notice logs one of the daemon's own messages (startup, reload, errors).
func (l *Log) Notice(level slog.Level, msg string, attrs ...slog.Attr) {
	if l.json != nil {
		l.json.LogAttrs(nil, level, msg, attrs...)
		return
	}
	for _, a := range attrs {
		msg += " " + a.Key + "=" + a.Value.String()
	}
	l.text(l.now(), "qualifyd: "+msg)
}

// Line logs one line of text as it is, in the text format's voice (the
// demo's story); the JSON form logs it as a message.
func (l *Log) Line(at time.Time, line string) {
	if l.json != nil {
		l.json.LogAttrs(nil, slog.LevelInfo, line)
		return
	}
	l.text(at, line)
}

// text logs line with the timestamp at.
func (l *Log) text(at time.Time, line string) {
	l.out.add(func(b []byte) []byte { return l.appendText(b, at, line) })
}

// appendText appends line as a text line stamped at.
func (l *Log) appendText(b []byte, at time.Time, line string) []byte {
	b = append(b, '[')
	b = l.stamp(b, at)
	b = append(b, "] "...)
	b = append(b, line...)
	return append(b, '\n')
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

// endpointAttrs are the JSON fields of an endpoint line: the endpoint, the
// line's state (to, and available as a bool), and the contact event that
// caused it (seq, aor, uri), which is zero for a configuration change.
func endpointAttrs(c endpoint.LogChange, ev engine.Event) []slog.Attr {
	from, to := "Reachable", "Unreachable"
	if c.Reachable {
		from, to = to, from
	}
	attrs := []slog.Attr{slog.String("event", "endpoint"), slog.String("endpoint", c.Name),
		slog.String("from", from), slog.String("to", to), slog.Bool("available", c.Reachable)}
	if ev.Seq != 0 {
		attrs = append(attrs, slog.Uint64("seq", ev.Seq), slog.String("aor", ev.AoR), slog.String("uri", ev.URI))
	}
	return attrs
}
