package pjsip

import (
	"errors"
	"net"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Sink is one type=sink section of qualifyd's own file: a router (or
// receiver) that qualifyd keeps in step with its verdicts. Asterisk never
// reads these sections. Unset options have the defaults below, applied in
// one step after the section is read.
type Sink struct {
	// Name is the section's name.
	Name string
	// Driver is "ami", "kamailio" or "webhook".
	Driver string
	// File and Line locate the section's header.
	File string
	Line int

	// AoRs are the AoRs the sink follows (aors=); nil means every AoR
	// whose qualify is on.
	AoRs []string
	// ReassertInterval is how often every known state is pushed again
	// (reassert_interval, default 300 s; 0 never). A webhook does not
	// reassert: it delivers changes, and a receiver that wants the levels
	// reads the API.
	ReassertInterval time.Duration
	// Timeout bounds each request to the router (timeout, default 5 s).
	Timeout time.Duration

	// Address is the AMI's host:port (ami).
	Address string
	// TLS speaks AMI over TLS (tls=yes; ami).
	TLS bool
	// Username is the AMI user (ami).
	Username string
	// Secret is the AMI password, or the webhook's HMAC key: from secret=,
	// or the first line of secret_file=. Never print it: its String is a
	// placeholder.
	Secret Secret
	// SecretFile is the file the secret was read from, "" for secret=.
	SecretFile string
	// Auth is "md5" (Challenge, the default) or "plain" (ami).
	Auth string
	// DevicePrefix names the custom devices, "Custom:" by default (ami).
	DevicePrefix string
	// Method is "devstate" (Setvar DEVICE_STATE, the default) or
	// "maintenance" (PJSIPSetMaintenance; ami).
	Method string
	// ObserveCalls hears the outcome of Asterisk's outgoing calls to the
	// qualified endpoints over a Manager session of its own, as evidence
	// for qualify (observe_calls=yes; ami; off by default).
	ObserveCalls bool
	// HeartbeatInterval is how often the heartbeat is sent: the astdb
	// DBPut of an ami sink, the htable item of a kamailio sink, the
	// heartbeat POST of a webhook (heartbeat_interval, default 10 s; 0
	// never).
	HeartbeatInterval time.Duration
	// FailOpenAfter is how long the router may go without a heartbeat
	// before it treats qualifyd's verdicts as stale and routes every
	// object (failopen_after, default 40 s; at least 3 heartbeat
	// intervals, so that two lost heartbeats never fail open). A webhook
	// sends it as each body's expires, that much after the POST.
	FailOpenAfter time.Duration

	// URL is the JSON-RPC endpoint (kamailio) or the receiver (webhook).
	URL string
	// ResyncInterval is how often dispatcher.list is read back (kamailio,
	// resync_interval, default 30 s; 0 only at connect).
	ResyncInterval time.Duration
}

// Secret is a password or key read from the configuration. It prints as
// a placeholder, in fmt and in JSON, so that no log line, error or API
// answer shows it by accident; Reveal returns it.
type Secret string

// String returns a placeholder, or "" for no secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "(secret)"
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// MarshalText is String, for JSON and other encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret itself, for the driver that sends it.
func (s Secret) Reveal() string { return string(s) }

// Sink defaults.
const (
	DefaultReassertInterval  = 300 * time.Second
	DefaultSinkTimeout       = 5 * time.Second
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultFailOpenAfter     = 40 * time.Second
	DefaultResyncInterval    = 30 * time.Second
	DefaultDevicePrefix      = "Custom:"
)

// Equal reports whether s and o configure the same sink, secret
// included; a reload keeps a sink that is Equal to its new definition
// running, and replaces any other.
func (s *Sink) Equal(o *Sink) bool {
	a, b := *s, *o
	a.File, a.Line, b.File, b.Line = "", 0, "", 0
	return reflect.DeepEqual(a, b)
}

// sinkReader reads one sink section: the options seen, so that the
// defaulting step and the checks know what was set.
type sinkReader struct {
	s      *Sink
	set    map[string]variable
	secret func(name string) (string, error)
}

// sinkOption applies one option's value.
type sinkOption func(r *sinkReader, v string) error

// sinkOptions are the options of each driver, after the common ones.
var sinkOptions = map[string]map[string]sinkOption{
	"ami": {
		"address": func(r *sinkReader, v string) error { r.s.Address = v; return checkHostPort(v) },
		"tls":     func(r *sinkReader, v string) (err error) { r.s.TLS, err = parseBool(v); return err },
		"username": func(r *sinkReader, v string) error {
			r.s.Username = v
			return checkNoBreak(v)
		},
		"secret":             setSecret,
		"secret_file":        setSecretFile,
		"auth":               oneOf(func(s *Sink) *string { return &s.Auth }, "md5", "plain"),
		"device_prefix":      setPrefix,
		"method":             oneOf(func(s *Sink) *string { return &s.Method }, "devstate", "maintenance"),
		"observe_calls":      func(r *sinkReader, v string) (err error) { r.s.ObserveCalls, err = parseBool(v); return err },
		"heartbeat_interval": sinkHeartbeat,
		"failopen_after":     sinkFailOpen,
	},
	"kamailio": {
		"url":                setURL,
		"resync_interval":    sinkSeconds(func(s *Sink) *time.Duration { return &s.ResyncInterval }),
		"heartbeat_interval": sinkSeconds(func(s *Sink) *time.Duration { return &s.HeartbeatInterval }),
		"failopen_after":     sinkFailOpen,
	},
	"webhook": {
		"url":                setURL,
		"secret":             setSecret,
		"secret_file":        setSecretFile,
		"heartbeat_interval": sinkHeartbeat,
		"failopen_after":     sinkFailOpen,
	},
}

// sinkHeartbeat reads heartbeat_interval= (ami, webhook).
var sinkHeartbeat = sinkSeconds(func(s *Sink) *time.Duration { return &s.HeartbeatInterval })

// commonSinkOptions are every driver's options.
var commonSinkOptions = map[string]sinkOption{
	"aors":              setSinkAoRs,
	"reassert_interval": sinkSeconds(func(s *Sink) *time.Duration { return &s.ReassertInterval }),
	"timeout":           sinkTimeout,
}

// required are the options each driver needs.
var required = map[string][]string{
	"ami":      {"address", "username"},
	"kamailio": {"url"},
	"webhook":  {"url"},
}

// readSink reads a type=sink section. secret reads a secret_file.
func readSink(d *def, secret func(string) (string, error)) (*Sink, error) {
	r := &sinkReader{s: &Sink{Name: strings.Clone(d.name), File: d.file, Line: d.line},
		set: map[string]variable{}, secret: secret}
	if err := r.driver(d); err != nil {
		return nil, err
	}
	for _, v := range d.vars {
		if err := r.option(d.name, v); err != nil {
			return nil, err
		}
	}
	if err := r.check(d); err != nil {
		return nil, err
	}
	r.defaults()
	if err := r.checkFailOpen(d); err != nil {
		return nil, err
	}
	return r.s, nil
}

// checkFailOpen rejects a failopen_after shorter than three heartbeat
// intervals: the router would fail open after two lost heartbeats.
func (r *sinkReader) checkFailOpen(d *def) error {
	s := r.s
	if s.Method == "maintenance" && s.HeartbeatInterval <= 0 {
		return optErr(d.name, r.set["heartbeat_interval"], causef(ErrValue,
			"method=maintenance needs a heartbeat: Asterisk keeps an endpoint in maintenance until told otherwise, and `qualifyd guard` releases it only when the heartbeat goes stale"))
	}
	if s.HeartbeatInterval <= 0 || s.FailOpenAfter >= 3*s.HeartbeatInterval {
		return nil
	}
	v, ok := r.set["failopen_after"]
	if !ok {
		v = r.set["heartbeat_interval"]
	}
	return optErr(d.name, v, causef(ErrValue, "failopen_after (%v) must be at least 3 x heartbeat_interval (%v), or the router fails open after two lost heartbeats",
		s.FailOpenAfter.Seconds(), s.HeartbeatInterval.Seconds()))
}

// driver reads driver=, which decides the other options.
func (r *sinkReader) driver(d *def) error {
	v, ok := lastOf(d.vars, "driver")
	if !ok {
		return &Error{File: d.file, Line: d.line, Section: d.name, Err: causef(ErrValue, `a sink needs driver= (ami, kamailio or webhook)`)}
	}
	if _, known := sinkOptions[v.value]; !known {
		return optErr(d.name, v, causef(ErrValue, "%q is not a sink driver (ami, kamailio or webhook)", v.value))
	}
	r.s.Driver = strings.Clone(v.value)
	return nil
}

// option applies one option; the last value of each wins.
func (r *sinkReader) option(sec string, v variable) error {
	if v.name == "type" || v.name == "driver" {
		return nil
	}
	apply, ok := commonSinkOptions[v.name]
	if !ok {
		apply, ok = sinkOptions[r.s.Driver][v.name]
	}
	if !ok {
		return optErr(sec, v, causef(ErrUnknownOption, "a %s sink has no option %q", r.s.Driver, v.name))
	}
	if v.name == "reassert_interval" && r.s.Driver == "webhook" {
		return optErr(sec, v, causef(ErrUnknownOption, "a webhook sink does not reassert: it delivers each change once"))
	}
	r.set[v.name] = v
	if err := apply(r, strings.Clone(v.value)); err != nil {
		return optErr(sec, v, err)
	}
	return nil
}

// check rejects a missing required option and both secret= and
// secret_file=.
func (r *sinkReader) check(d *def) error {
	for _, name := range required[r.s.Driver] {
		if _, ok := r.set[name]; !ok {
			return &Error{File: d.file, Line: d.line, Section: d.name,
				Err: causef(ErrValue, "driver=%s needs %s=", r.s.Driver, name)}
		}
	}
	if _, ok := r.set["secret"]; ok {
		if v, both := r.set["secret_file"]; both {
			return optErr(d.name, v, causef(ErrValue, "give secret= or secret_file=, not both"))
		}
	}
	if r.s.Driver == "ami" && r.s.Secret == "" {
		return &Error{File: d.file, Line: d.line, Section: d.name, Err: causef(ErrValue, "an ami sink needs secret_file= (or secret=)")}
	}
	return nil
}

// defaults fills the options left unset.
func (r *sinkReader) defaults() {
	s := r.s
	def := func(name string, d *time.Duration, v time.Duration) {
		if _, ok := r.set[name]; !ok {
			*d = v
		}
	}
	def("timeout", &s.Timeout, DefaultSinkTimeout)
	if s.Driver == "ami" || s.Driver == "webhook" {
		def("heartbeat_interval", &s.HeartbeatInterval, DefaultHeartbeatInterval)
		def("failopen_after", &s.FailOpenAfter, DefaultFailOpenAfter)
	}
	switch s.Driver {
	case "ami":
		def("reassert_interval", &s.ReassertInterval, DefaultReassertInterval)
		if _, ok := r.set["device_prefix"]; !ok {
			s.DevicePrefix = DefaultDevicePrefix
		}
		s.Auth, s.Method = cmpOr(s.Auth, "md5"), cmpOr(s.Method, "devstate")
	case "kamailio":
		def("reassert_interval", &s.ReassertInterval, DefaultReassertInterval)
		def("resync_interval", &s.ResyncInterval, DefaultResyncInterval)
		def("heartbeat_interval", &s.HeartbeatInterval, DefaultHeartbeatInterval)
		def("failopen_after", &s.FailOpenAfter, DefaultFailOpenAfter)
	}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func setSecret(r *sinkReader, v string) error {
	if v == "" {
		return causef(ErrValue, "the secret is empty")
	}
	r.s.Secret, r.s.SecretFile = Secret(v), ""
	return nil
}

// setSecretFile reads the secret: the file's first line, without its
// line end. The error names the file, never its content.
func setSecretFile(r *sinkReader, v string) error {
	text, err := r.secret(v)
	if err != nil {
		return causef(ErrValue, "cannot read %s: %v", v, unwrapPath(err))
	}
	line, _, _ := strings.Cut(text, "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return causef(ErrValue, "%s: the secret is empty", v)
	}
	r.s.Secret, r.s.SecretFile = Secret(line), v
	return nil
}

// unwrapPath drops the fs.PathError's own copy of the path, which the
// message already names.
func unwrapPath(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

func setPrefix(r *sinkReader, v string) error {
	r.s.DevicePrefix = v
	return checkNoBreak(v)
}

func setURL(r *sinkReader, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return causef(ErrValue, "%q is not an http:// or https:// URL", v)
	}
	if u.User != nil {
		return causef(ErrValue, "the URL must not carry credentials")
	}
	r.s.URL = v
	return nil
}

func setSinkAoRs(r *sinkReader, v string) error {
	r.s.AoRs = splitList(v)
	if len(r.s.AoRs) == 0 {
		return causef(ErrValue, "aors= lists no AoR")
	}
	return nil
}

// oneOf sets the field to a value among allowed.
func oneOf(field func(*Sink) *string, allowed ...string) sinkOption {
	return func(r *sinkReader, v string) error {
		if !slices.Contains(allowed, v) {
			return causef(ErrValue, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
		*field(r.s) = v
		return nil
	}
}

// sinkSeconds reads fractional seconds in [0, 86400].
func sinkSeconds(field func(*Sink) *time.Duration) sinkOption {
	return func(r *sinkReader, v string) (err error) {
		*field(r.s), err = parseSeconds(v)
		return err
	}
}

// sinkFailOpen reads failopen_after=: seconds, more than 0, since a
// router that fails open at once never follows a verdict.
func sinkFailOpen(r *sinkReader, v string) error {
	d, err := parseSeconds(v)
	if err == nil && d <= 0 {
		err = causef(ErrValue, "%q: the fail-open window must be more than 0 seconds", v)
	}
	r.s.FailOpenAfter = d
	return err
}

// sinkTimeout reads timeout=: seconds, more than 0, since a request that
// may take no time never succeeds.
func sinkTimeout(r *sinkReader, v string) error {
	d, err := parseSeconds(v)
	if err == nil && d <= 0 {
		err = causef(ErrValue, "%q: a request needs a timeout of more than 0 seconds", v)
	}
	r.s.Timeout = d
	return err
}

func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" || port == "" {
		return causef(ErrValue, "%q is not host:port", v)
	}
	_, err = parseRange(port, 1, 65535)
	return err
}

// checkNoBreak refuses a value that would break a Manager protocol line.
func checkNoBreak(v string) error {
	if strings.ContainsAny(v, "\r\n") {
		return causef(ErrValue, "%q contains a line break", v)
	}
	return nil
}

// checkSinkAoRs rejects a sink's aors= that names no configured AoR.
func checkSinkAoRs(s *Sink, aors []AoR) error {
	for _, name := range s.AoRs {
		_, found := slices.BinarySearchFunc(aors, name, func(a AoR, n string) int { return strings.Compare(a.Name, n) })
		if !found {
			return &Error{File: s.File, Line: s.Line, Section: s.Name, Option: "aors",
				Err: causef(ErrReference, "no AoR %q", name)}
		}
	}
	return nil
}

// secretReader returns the function that reads a secret_file: an
// absolute path, or one relative to the configuration directory, in the
// parser's file system.
func secretReader(p *parser) func(string) (string, error) {
	fsys, dir := p.fsys, p.dir
	return func(name string) (string, error) {
		if !path.IsAbs(name) {
			name = path.Join(dir, name)
		}
		return readFile(fsys, fsName(name))
	}
}
