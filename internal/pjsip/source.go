package pjsip

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Source is one type=source section of qualifyd's own file: a list a
// router already keeps (Kamailio's dispatcher, over JSON-RPC or in its
// file, or Asterisk's realtime database) whose entries become AoRs (and,
// from a database, endpoints and auths) as if they had been written in
// the file. Asterisk never reads these sections. Unset options have the
// defaults below, applied in one step after the section is read.
type Source struct {
	// Name is the section's name.
	Name string
	// Driver is "kamailio" (dispatcher.list over JSON-RPC),
	// "dispatcher_file" (Kamailio's dispatcher list file) or "realtime"
	// (Asterisk's ps_aors, ps_endpoints and ps_auths in PostgreSQL, MySQL
	// or MariaDB, which the DSN names).
	Driver string
	// File and Line locate the section's header.
	File string
	Line int

	// URL is the JSON-RPC endpoint (kamailio).
	URL string
	// Path is the dispatcher list file (dispatcher_file), resolved
	// against the configuration directory when relative.
	Path string
	// DSNFile is the file the database's connection string was read
	// from (realtime, dsn_file=), as written (a relative one is read
	// from the configuration directory); DSN is its first line. Never print the
	// DSN: it holds the database password, and its String is a
	// placeholder.
	DSNFile string
	DSN     Secret
	// Sets are the dispatcher sets imported (sets=); nil means every set.
	Sets []int
	// Template is the section whose options every imported AoR starts
	// from (template=), "" for none. It must be defined before the source.
	Template string
	// RefreshInterval is how often the list is read again
	// (refresh_interval, default 30 s, more than 0).
	RefreshInterval time.Duration
	// Timeout bounds each read of the router (timeout, default 5 s;
	// kamailio and realtime): for realtime, the connection and its
	// queries together.
	Timeout time.Duration
}

// Source defaults.
const (
	DefaultRefreshInterval = 30 * time.Second
	DefaultSourceTimeout   = 5 * time.Second
)

// Wants reports whether the source imports the destinations of set.
func (s *Source) Wants(set int) bool {
	return s.Sets == nil || slices.Contains(s.Sets, set)
}

// Object is one object a source imports, added to the configuration as
// the section
//
//	[Name]
//	type=Type
//	(the source's template's options, for an aor)
//	Options...
//
// right after the source's section, so that "[Name](+type=aor)" sections
// later in the file add to it as they add to a written AoR. A driver for
// a database of PJSIP objects returns its AoRs, endpoints and auths the
// same way.
type Object struct {
	// Type is "aor", "endpoint" or "auth".
	Type string
	// Name is the object's name: unique among the objects of its type in
	// the whole configuration.
	Name string
	// Options are the object's options, in order, as a section's lines.
	Options []KeyValue
	// File and Line say where the router keeps the object, for errors:
	// the list file's line, or the answer and the destination's place in
	// it.
	File string
	Line int
}

// KeyValue is one option of an Object.
type KeyValue struct{ Key, Value string }

// Importer returns the objects of one source; the reader calls it for
// each type=source section, where the section ends.
type Importer func(*Source) ([]Object, error)

// sourceOption applies one option's value; secret reads a dsn_file.
type sourceOption func(s *Source, v string, secret func(string) (string, error)) error

// plain is a sourceOption that reads no file.
func plain(f func(s *Source, v string) error) sourceOption {
	return func(s *Source, v string, _ func(string) (string, error)) error { return f(s, v) }
}

// setSourceTimeout reads timeout=.
func setSourceTimeout(s *Source, v string) (err error) {
	s.Timeout, err = positiveSeconds(v, "a read")
	return err
}

// sourceOptions are the options each driver accepts besides the common
// ones.
var sourceOptions = map[string]map[string]sourceOption{
	"kamailio": {
		"sets":    plain(setSets),
		"url":     plain(func(s *Source, v string) error { s.URL = v; return checkURL(v) }),
		"timeout": plain(setSourceTimeout),
	},
	"dispatcher_file": {
		"sets": plain(setSets),
		"path": plain(func(s *Source, v string) error { s.Path = v; return nil }),
	},
	"realtime": {
		"dsn_file": setDSNFile,
		"dsn": plain(func(*Source, string) error {
			return causef(ErrValue, "a DSN holds the database password: write it in a file named by dsn_file=")
		}),
		"timeout": plain(setSourceTimeout),
	},
}

// drivers names the drivers, for errors.
const drivers = "kamailio, dispatcher_file or realtime"

// commonSourceOptions are every driver's options.
var commonSourceOptions = map[string]sourceOption{
	"template": plain(func(s *Source, v string) error { s.Template = v; return nil }),
	"refresh_interval": plain(func(s *Source, v string) (err error) {
		s.RefreshInterval, err = positiveSeconds(v, "a refresh")
		return err
	}),
}

// sourceRequired are the options each driver needs.
var sourceRequired = map[string]string{"kamailio": "url", "dispatcher_file": "path", "realtime": "dsn_file"}

// readSource reads a type=source section; dir resolves a relative path=,
// secret reads a dsn_file (relative to the configuration directory).
func readSource(d *def, dir string, secret func(string) (string, error)) (*Source, error) {
	s := &Source{Name: strings.Clone(d.name), File: d.file, Line: d.line}
	v, ok := lastOf(d.vars, "driver")
	if !ok {
		return nil, &Error{File: d.file, Line: d.line, Section: d.name, Err: causef(ErrValue, "a source needs driver= (%s)", drivers)}
	}
	if _, known := sourceOptions[v.value]; !known {
		return nil, optErr(d.name, v, causef(ErrValue, "%q: driver must be %s", v.value, drivers))
	}
	s.Driver = strings.Clone(v.value)
	set := map[string]bool{}
	for _, v := range d.vars {
		if err := sourceOptionOf(s, d.name, v, secret); err != nil {
			return nil, err
		}
		set[v.name] = true
	}
	if need := sourceRequired[s.Driver]; !set[need] {
		return nil, &Error{File: d.file, Line: d.line, Section: d.name, Err: causef(ErrValue, "driver=%s needs %s=", s.Driver, need)}
	}
	if s.Path != "" && !path.IsAbs(s.Path) {
		s.Path = path.Join(dir, s.Path)
	}
	s.RefreshInterval = cmpDuration(s.RefreshInterval, DefaultRefreshInterval)
	if s.Driver != "dispatcher_file" {
		s.Timeout = cmpDuration(s.Timeout, DefaultSourceTimeout)
	}
	return s, nil
}

// sourceOptionOf applies one option of a source section.
func sourceOptionOf(s *Source, sec string, v variable, secret func(string) (string, error)) error {
	if v.name == "type" || v.name == "driver" {
		return nil
	}
	apply, ok := commonSourceOptions[v.name]
	if !ok {
		apply, ok = sourceOptions[s.Driver][v.name]
	}
	if !ok {
		return optErr(sec, v, causef(ErrUnknownOption, "a %s source has no option %q", s.Driver, v.name))
	}
	if err := apply(s, strings.Clone(v.value), secret); err != nil {
		return optErr(sec, v, err)
	}
	return nil
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// positiveSeconds reads seconds in (0, 86400]; what names the interval.
func positiveSeconds(v, what string) (time.Duration, error) {
	d, err := parseSeconds(v)
	if err == nil && d <= 0 {
		err = causef(ErrValue, "%q: %s needs more than 0 seconds", v, what)
	}
	return d, err
}

// setDSNFile reads the connection string: the file's first line,
// without its line end; the file name stays as written, resolved as
// secret_file= is. The error names the file, never its content.
func setDSNFile(s *Source, v string, secret func(string) (string, error)) error {
	text, err := secret(v)
	if err != nil {
		return causef(ErrValue, "cannot read %s: %v", v, unwrapPath(err))
	}
	line, _, _ := strings.Cut(text, "\n")
	if line = strings.TrimSpace(line); line == "" {
		return causef(ErrValue, "%s: the first line is empty (want the connection string)", v)
	}
	s.DSN, s.DSNFile = Secret(line), v
	return nil
}

// setSets reads sets=: dispatcher set numbers, comma-separated.
func setSets(s *Source, v string) error {
	s.Sets = []int{}
	for item := range listItems(v) {
		n, err := strconv.ParseUint(item, 10, 31)
		if err != nil {
			return causef(ErrValue, "%q is not a dispatcher set number", item)
		}
		s.Sets = append(s.Sets, int(n))
	}
	if len(s.Sets) == 0 {
		return causef(ErrValue, "sets= lists no set")
	}
	return nil
}

// checkURL accepts an http:// or https:// URL without credentials.
func checkURL(v string) error {
	var r sinkReader
	r.s = &Sink{}
	return setURL(&r, v)
}
