package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// sinkJSON is one sink's effective options in check-config --json, times
// in seconds. The secret itself is never part of it: only where it comes
// from; nor a webhook's path and query, where receivers take their token
// (sink.RedactURL).
type sinkJSON struct {
	Name              string   `json:"name"`
	Driver            string   `json:"driver"`
	AoRs              []string `json:"aors"` // null: every qualified AoR
	ReassertInterval  *float64 `json:"reassert_interval,omitempty"`
	Timeout           float64  `json:"timeout"`
	Address           string   `json:"address,omitempty"`
	TLS               *bool    `json:"tls,omitempty"`
	Username          string   `json:"username,omitempty"`
	Secret            string   `json:"secret,omitempty"`
	Auth              string   `json:"auth,omitempty"`
	DevicePrefix      *string  `json:"device_prefix,omitempty"`
	Method            string   `json:"method,omitempty"`
	HeartbeatInterval *float64 `json:"heartbeat_interval,omitempty"`
	FailOpenAfter     *float64 `json:"failopen_after,omitempty"`
	URL               string   `json:"url,omitempty"`
	ResyncInterval    *float64 `json:"resync_interval,omitempty"`
}

// sinksJSON is every sink's effective options.
func sinksJSON(sinks []*pjsip.Sink) []sinkJSON {
	out := make([]sinkJSON, 0, len(sinks))
	for _, s := range sinks {
		j := sinkJSON{Name: s.Name, Driver: s.Driver, AoRs: s.AoRs, Timeout: s.Timeout.Seconds(),
			Secret: secretSource(s), URL: s.URL}
		if s.Driver == "webhook" {
			j.URL = sink.RedactURL(s.URL)
		}
		switch s.Driver {
		case "ami":
			j.ReassertInterval, j.HeartbeatInterval = ptr(s.ReassertInterval.Seconds()), ptr(s.HeartbeatInterval.Seconds())
			j.Address, j.TLS, j.Username, j.Auth = s.Address, ptr(s.TLS), s.Username, s.Auth
			j.DevicePrefix, j.Method = ptr(s.DevicePrefix), s.Method
			j.FailOpenAfter = ptr(s.FailOpenAfter.Seconds())
		case "webhook":
			j.HeartbeatInterval, j.FailOpenAfter = ptr(s.HeartbeatInterval.Seconds()), ptr(s.FailOpenAfter.Seconds())
		case "kamailio":
			j.ReassertInterval, j.ResyncInterval = ptr(s.ReassertInterval.Seconds()), ptr(s.ResyncInterval.Seconds())
			j.HeartbeatInterval, j.FailOpenAfter = ptr(s.HeartbeatInterval.Seconds()), ptr(s.FailOpenAfter.Seconds())
		}
		out = append(out, j)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// secretSource says where a sink's secret comes from, never what it is:
// "file PATH", "inline", or "" for none.
func secretSource(s *pjsip.Sink) string {
	switch {
	case s.SecretFile != "":
		return "file " + s.SecretFile
	case s.Secret != "":
		return "inline"
	}
	return ""
}

// writeSinks prints one line per sink after the AoRs.
func writeSinks(w *bufio.Writer, sinks []*pjsip.Sink) {
	for _, j := range sinksJSON(sinks) {
		fmt.Fprintf(w, "  sink %s  driver=%s", j.Name, j.Driver)
		for _, kv := range sinkFields(j) {
			if kv[1] != "" {
				fmt.Fprintf(w, " %s=%s", kv[0], kv[1])
			}
		}
		w.WriteByte('\n')
	}
}

// sinkFields are a sink's options as "name", "value" pairs, "" for
// those its driver does not have.
func sinkFields(j sinkJSON) [][2]string {
	aors := "all-qualified"
	if j.AoRs != nil {
		aors = strings.Join(j.AoRs, ",")
	}
	return [][2]string{
		{"address", j.Address}, {"tls", boolText(j.TLS)}, {"username", j.Username}, {"auth", j.Auth},
		{"method", j.Method}, {"device_prefix", deref(j.DevicePrefix)}, {"url", j.URL},
		{"secret", strings.ReplaceAll(j.Secret, " ", ":")}, {"aors", aors},
		{"reassert", secs(j.ReassertInterval)}, {"resync", secs(j.ResyncInterval)},
		{"heartbeat", secs(j.HeartbeatInterval)}, {"failopen", secs(j.FailOpenAfter)}, {"timeout", secs(&j.Timeout)},
	}
}

// boolText is "yes" or "no", "" for an option the driver lacks.
func boolText(b *bool) string {
	switch {
	case b == nil:
		return ""
	case *b:
		return "yes"
	}
	return "no"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func secs(f *float64) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("%gs", *f)
}

// warnSecrets warns of each secret= written in the file: secret_file=
// keeps it out of a file that is read, shared and backed up more widely.
func warnSecrets(stderr io.Writer, cfg *pjsip.Config) {
	for _, s := range cfg.Sinks {
		if s.Secret != "" && s.SecretFile == "" {
			fmt.Fprintf(stderr, "qualifyd check-config: warning: %s:%d: section %q: secret= is in the file; secret_file= is the documented way\n",
				s.File, s.Line, s.Name)
		}
	}
}
