package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
)

// Log prints the daemon's log: the engine's edges as Asterisk's lines, the
// endpoint lines, and the daemon's own notices. Text lines carry a
// timestamp; the JSON form (log/slog) carries the same events as fields.
// Safe for concurrent use. Lines are written as they come, or, between
// hold and release, in one write per burst: a million contacts going
// Unreachable log a million lines within a minute.
type Log struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte // lines not written yet
	held  bool
	json  *slog.Logger                         // nil for text
	stamp func(dst []byte, t time.Time) []byte // a text line's timestamp
	now   func() time.Time
}

// maxHeld is how much a held log buffers before it writes anyway.
const maxHeld = 64 << 10

// NewLog returns a log writing to w in format "text" (Asterisk's lines) or
// "json". stamp formats a text line's timestamp; nil means local wall-clock
// time with milliseconds.
func NewLog(w io.Writer, format string, stamp func(dst []byte, t time.Time) []byte) (*Log, error) {
	if stamp == nil {
		stamp = wallStamp
	}
	l := &Log{w: w, now: time.Now, stamp: stamp}
	switch format {
	case "text", "":
	case "json":
		l.json = slog.New(slog.NewJSONHandler(l, nil))
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return l, nil
}

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
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, '[')
	l.buf = l.stamp(l.buf, at)
	l.buf = append(l.buf, "] "...)
	l.buf = append(l.buf, line...)
	l.buf = append(l.buf, '\n')
	l.written()
}

// Write logs p, one record of the JSON handler.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	l.written()
	return len(p), nil
}

// written writes the buffer out unless the log is held and has room.
// Called with mu held. A failed write (a closed stdout) loses the lines,
// as an unbuffered write would.
func (l *Log) written() {
	if l.held && len(l.buf) < maxHeld {
		return
	}
	_, _ = l.w.Write(l.buf)
	l.buf = l.buf[:0]
}

// hold buffers the lines logged until release, which writes them at once.
func (l *Log) hold() {
	l.mu.Lock()
	l.held = true
	l.mu.Unlock()
}

// release writes the lines held since hold.
func (l *Log) release() {
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
