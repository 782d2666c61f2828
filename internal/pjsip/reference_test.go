package pjsip

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qualifyd/qualifyd/internal/docref"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// reference is the configuration reference, the page man 5 qualifyd.conf
// is made from.
const reference = "../../docs/configuration.md"

// referenceConfig parses a configuration with one section of each type
// qualifyd reads, each with only the options it needs, so that every other
// option takes its default.
func referenceConfig(t *testing.T) *Config {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"ami.secret": "s\n", "db.dsn": "postgres://q@127.0.0.1/asterisk\n",
		"dispatcher.list": "1 sip:192.0.2.10:5060 0 0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := `[plain]
type=aor
contact=sip:a@192.0.2.1:5060

[auto]
type=aor
contact=sip:b@192.0.2.2:5060
qualify_failures=auto

[ami]
type=sink
driver=ami
address=127.0.0.1:5038
username=q
secret_file=ami.secret

[kam]
type=sink
driver=kamailio
url=http://127.0.0.1:5071/RPC

[hook]
type=sink
driver=webhook
url=http://127.0.0.1:9/hook

[kamsrc]
type=source
driver=kamailio
url=http://127.0.0.1:5071/RPC

[file]
type=source
driver=dispatcher_file
path=dispatcher.list

[db]
type=source
driver=realtime
dsn_file=db.dsn
`
	cfg, err := Parse(filepath.Join(dir, "q.conf"), []byte(src), Options{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestReferenceAoROptions: the reference's type=aor table lists every AoR
// option the reader accepts, qualifyd's with their defaults.
func TestReferenceAoROptions(t *testing.T) {
	cfg := referenceConfig(t)
	aors := map[string]qualify.Policy{}
	for _, a := range cfg.AoRs {
		aors[a.Name] = a.PolicyValue()
	}
	plain, auto := aors["plain"], aors["auto"]
	e, ea := plain.Effective(), auto.Effective()
	want := map[string]any{
		"contact":                       "",
		"outbound_proxy":                "",
		"qualify_frequency":             plain.Frequency.Seconds(),
		"qualify_timeout":               e.Timeout.Seconds(),
		"qualify_2xx_only":              plain.Only2xx,
		"qualify_latency_only":          plain.LatencyOnly,
		"qualify_failures":              float64(e.Failures),
		"qualify_failures_min":          float64(ea.FailuresMin),
		"qualify_failures_max":          float64(ea.FailuresMax),
		"qualify_false_outages_per_day": ea.FalseOutagesPerDay,
		"qualify_failure_window":        plain.FailureWindow.Seconds(),
		"qualify_success_codes":         plain.SuccessCodes.String(),
		"qualify_successes":             float64(e.Successes),
		// 0: the fallbacks (F; R, else F) are the table's to say.
		"qualify_retry_interval": plain.RetryInterval.Seconds(),
		"qualify_down_interval":  plain.DownInterval.Seconds(),
		"authenticate_qualify":   false,
	}
	for o := range aorOptions {
		if _, ok := want[o]; !ok && o != "type" {
			want[o] = nil // accepted with no effect: named, no default
		}
	}
	docref.CheckTable(t, reference, "## `type=aor`", want, nil)
}

// TestReferenceGlobalOptions: the type=global table lists the global
// options qualifyd reads, with their defaults.
func TestReferenceGlobalOptions(t *testing.T) {
	cfg := referenceConfig(t)
	want := map[string]any{
		"max_initial_qualify_time": cfg.MaxInitialQualifyTime.Seconds(),
		"panic_threshold":          float64(cfg.Panic.Threshold),
		"panic_min_destinations":   float64(cfg.Panic.MinDestinations),
		"panic_hold_threshold":     float64(cfg.Panic.HoldThreshold),
	}
	if len(want) != len(globalOptions) {
		t.Fatalf("the reader has %d global options, the test knows %d", len(globalOptions), len(want))
	}
	docref.CheckTable(t, reference, "## `type=global`", want, nil)
}

// TestReferenceSinkOptions: the type=sink table lists every sink option,
// the drivers that accept it and its default.
func TestReferenceSinkOptions(t *testing.T) {
	cfg := referenceConfig(t)
	sinks := map[string]*Sink{}
	for _, s := range cfg.Sinks {
		sinks[s.Name] = s
	}
	ami, kam, hook := sinks["ami"], sinks["kam"], sinks["hook"]
	want := map[string]any{
		"driver":             docref.Required{},
		"aors":               docref.Every{},
		"timeout":            ami.Timeout.Seconds(),
		"reassert_interval":  ami.ReassertInterval.Seconds(),
		"address":            docref.Required{},
		"tls":                ami.TLS,
		"username":           docref.Required{},
		"secret_file":        nil,
		"secret":             nil,
		"auth":               ami.Auth,
		"method":             ami.Method,
		"device_prefix":      ami.DevicePrefix,
		"observe_calls":      ami.ObserveCalls,
		"heartbeat_interval": ami.HeartbeatInterval.Seconds(),
		"failopen_after":     ami.FailOpenAfter.Seconds(),
		"url":                docref.Required{},
		"resync_interval":    kam.ResyncInterval.Seconds(),
	}
	for _, s := range []*Sink{kam, hook} {
		if s.Timeout != ami.Timeout || s.HeartbeatInterval != ami.HeartbeatInterval || s.FailOpenAfter != ami.FailOpenAfter {
			t.Errorf("sink %s: the defaults differ between drivers; the reference gives one", s.Name)
		}
	}
	if kam.ReassertInterval != ami.ReassertInterval {
		t.Errorf("reassert_interval: the defaults differ between ami and kamailio")
	}
	for d, opts := range required {
		for _, o := range opts {
			if _, ok := want[o].(docref.Required); !ok {
				t.Errorf("%s: required by driver %s, not in the test as required", o, d)
			}
		}
	}
	// A webhook does not reassert: it delivers changes.
	drivers := acceptedBy(sinkOptions, commonSinkOptions, func(o, d string) bool { return o == "reassert_interval" && d == "webhook" })
	docref.CheckTable(t, reference, "## `type=sink`", want, drivers)
}

// TestReferenceSourceOptions: the type=source table lists every source
// option, the drivers that accept it and its default.
func TestReferenceSourceOptions(t *testing.T) {
	cfg := referenceConfig(t)
	sources := map[string]*Source{}
	for _, s := range cfg.Sources {
		sources[s.Name] = s
	}
	kam := sources["kamsrc"]
	if kam.Sets != nil {
		t.Fatalf("a source without sets= has sets %v, want nil (every set)", kam.Sets)
	}
	want := map[string]any{
		"driver":           docref.Required{},
		"url":              docref.Required{},
		"timeout":          kam.Timeout.Seconds(),
		"path":             docref.Required{},
		"dsn_file":         docref.Required{},
		"sets":             docref.Every{},
		"template":         kam.Template,
		"refresh_interval": kam.RefreshInterval.Seconds(),
	}
	for _, o := range sourceRequired {
		if _, ok := want[o].(docref.Required); !ok {
			t.Errorf("%s: required by a driver, not in the test as required", o)
		}
	}
	if db := sources["db"]; db.Timeout != kam.Timeout || db.RefreshInterval != kam.RefreshInterval {
		t.Errorf("the realtime source's defaults differ from kamailio's; the reference gives one")
	}
	// dsn= is accepted only to be refused with its reason.
	drivers := acceptedBy(sourceOptions, commonSourceOptions, func(o, _ string) bool { return o == "dsn" })
	// The drivers column of driver= itself is empty: every driver.
	docref.CheckTable(t, reference, "## `type=source`", want, drivers)
}

// acceptedBy returns, per option, the drivers that accept it, sorted: the
// driver's own options and the common ones, but those skip refuses, and
// driver= itself for every driver.
func acceptedBy[V any](perDriver map[string]map[string]V, common map[string]V, skip func(option, driver string) bool) map[string][]string {
	drivers := map[string][]string{"driver": slices.Sorted(maps.Keys(perDriver))}
	for d, opts := range perDriver {
		for o := range maps.Keys(opts) {
			if !skip(o, d) {
				drivers[o] = append(drivers[o], d)
			}
		}
		for o := range maps.Keys(common) {
			if !skip(o, d) {
				drivers[o] = append(drivers[o], d)
			}
		}
	}
	for o := range drivers {
		slices.Sort(drivers[o])
	}
	return drivers
}
