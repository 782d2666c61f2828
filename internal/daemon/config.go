package daemon

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Config configures a Daemon. ConfigFile (or Load) is required; the zero
// value of every other field works.
type Config struct {
	// ConfigFile is the configuration file in pjsip.conf syntax, read at
	// start and on every reload.
	ConfigFile string
	// ConfigDir is the directory relative #include paths resolve against
	// (Asterisk's astetcdir); empty means ConfigFile's directory.
	ConfigDir string
	// Load, if set, replaces reading ConfigFile: it returns the
	// configuration to apply, at start and on every reload.
	Load func() (*pjsip.Config, error)

	// ReloadAllowShrink lets every reload, SIGHUP's too, apply a
	// configuration that drops every AoR or more than half of the
	// contacts; without it such a reload is refused (ErrShrink) unless
	// forced (qualify-semantics §8).
	ReloadAllowShrink bool

	// Node is this node's name in the configuration's type=cluster
	// section (--node); "" means the host's short name, which must then
	// be one of the section's nodes. Without a cluster section it must
	// be "".
	Node string

	// SIPBind is the local UDP address of the probe socket; empty means
	// an ephemeral port on all interfaces.
	SIPBind string
	// Coalesce is engine.Config.Coalesce: zero means the engine's default,
	// a negative value exact starts.
	Coalesce time.Duration
	// Rand, if set, is the engine's source of random numbers in [0, 1)
	// for the first probes' delays.
	Rand func() float64

	// StateFile, if set, is where the contacts' state and the event
	// numbers are kept across restarts (see package state): read at
	// start, written every 10 s while anything changed and at shutdown.
	// The AoRs' histories are kept beside it, in StateFile + ".history",
	// written every 5 minutes while anything changed and at shutdown. A
	// file that cannot be used is logged and ignored.
	StateFile string
	// The sources' last good lists are kept in StateFile + ".sources",
	// written atomically after every change applied.
	// HistoryAoRs is engine.Config.HistoryAoRs: how many AoRs keep a
	// history; zero means the engine's default, negative none.
	HistoryAoRs int
	// HistoryBucket is engine.Config.HistoryBucket, the width of a
	// history's buckets; zero means the engine's default.
	HistoryBucket time.Duration

	// HTTPAddr is the API, metrics and status page address; empty
	// disables HTTP.
	HTTPAddr string
	// HTTPFallback, when HTTPAddr is busy, listens on an ephemeral
	// loopback port instead of failing.
	HTTPFallback bool
	// Token, if not empty, is the bearer token the API's write routes
	// require.
	Token string
	// PerAoR > 0 exports per-AoR metric series for at most that many
	// AoRs.
	PerAoR int
	// Version is the daemon's version, for the metrics and the page.
	Version string

	// Log receives the log lines; nil discards them.
	Log io.Writer
	// LogFormat is "text" (Asterisk's lines, the default) or "json".
	LogFormat string
	// LogStamp, if set, formats a text line's timestamp; nil means local
	// wall-clock time with milliseconds.
	LogStamp func(dst []byte, t time.Time) []byte
	// Errors receives HTTP handler panics and the HTTP server's errors;
	// nil discards them. Like Log, it is written by a goroutine of its
	// own: what a stalled reader does not take is dropped (and counted
	// with the log's lines), never waited for.
	Errors io.Writer

	// EndpointChanged, if set, is called with every change of an
	// endpoint's availability, in order, from the goroutine that follows
	// the engine's events; it must not block.
	EndpointChanged func(endpoint.Change)

	// Notify, if set, receives the daemon's state for the service
	// manager, one sd_notify(3) message at a time ("READY=1",
	// "STOPPING=1", "WATCHDOG=1", "STATUS=..."); it must not block for
	// long. Its first error is logged.
	Notify func(state string) error
	// Watchdog, when positive with Notify, is the service manager's
	// watchdog timeout: the daemon sends WATCHDOG=1 every half of it
	// while its engine answers.
	Watchdog time.Duration

	// SinkDial, if set, replaces the AMI sinks' network dial (tests).
	SinkDial func(ctx context.Context, network, addr string) (net.Conn, error)

	// events is the buffer of the log's and the sinks' subscriptions;
	// zero means eventBuffer. Tests make it small to lose events.
	events int
	// logBuffer is the log's buffer in bytes; zero means
	// defaultLogBuffer.
	logBuffer int
	// stalledAfter replaces the default bound of vouch (tests).
	stalledAfter time.Duration
}

// load reads the configuration; imp returns the sources' objects.
func (c *Config) load(imp pjsip.Importer) (*pjsip.Config, error) {
	if c.Load != nil {
		return c.Load()
	}
	return pjsip.Load(c.ConfigFile, pjsip.Options{ConfigDir: c.ConfigDir, Import: imp})
}
