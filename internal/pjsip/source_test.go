package pjsip

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// gateways imports two dispatcher destinations, as a driver returns them.
func gateways(names ...string) Importer {
	return func(s *Source) ([]Object, error) {
		var out []Object
		for i, n := range names {
			out = append(out, Object{Type: "aor", Name: n, File: s.URL + " dispatcher.list", Line: i + 1,
				Options: []KeyValue{{"contact", fmt.Sprintf("sip:192.0.2.%d:5060;transport=udp", i+1)}}})
		}
		return out, nil
	}
}

const gwTemplate = "[gw](!)\ntype=aor\nqualify_frequency=30\nqualify_failures=3\n"

func TestSourceErrors(t *testing.T) {
	tests := []struct {
		name, src string
		is        error
		want      string
	}{
		{"no driver", "[s]\ntype=source", ErrValue,
			`pjsip.conf:1: section "s": invalid value: a source needs driver= (kamailio, dispatcher_file or realtime)`},
		{"unknown driver", "[s]\ntype=source\ndriver=odbc", ErrValue,
			`pjsip.conf:3: section "s": option "driver": invalid value: "odbc": driver must be kamailio, dispatcher_file or realtime`},
		{"no url", "[s]\ntype=source\ndriver=kamailio", ErrValue,
			`pjsip.conf:1: section "s": invalid value: driver=kamailio needs url=`},
		{"no path", "[s]\ntype=source\ndriver=dispatcher_file", ErrValue,
			`pjsip.conf:1: section "s": invalid value: driver=dispatcher_file needs path=`},
		{"path on kamailio", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\npath=/x", ErrUnknownOption,
			`pjsip.conf:5: section "s": option "path": unknown option: a kamailio source has no option "path"`},
		{"bad sets", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\nsets=1,x", ErrValue,
			`pjsip.conf:5: section "s": option "sets": invalid value: "x" is not a dispatcher set number`},
		{"zero refresh", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\nrefresh_interval=0", ErrValue,
			`pjsip.conf:5: section "s": option "refresh_interval": invalid value: "0": a refresh needs more than 0 seconds`},
		{"missing template", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\ntemplate=gw", ErrNoSection,
			`pjsip.conf:5: section "s": option "template": no such section: "gw" is not defined before the source`},
		{"two sources", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\n[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC", ErrDuplicate,
			"http://h/RPC dispatcher.list:1: section \"gw1\": duplicate section: a second aor named \"gw1\" (the first is at http://h/RPC dispatcher.list:1)\n" +
				`pjsip.conf:5: section "s": duplicate section: a second source named "s" (the first is at pjsip.conf:1)`},
		{"append to a source", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\n[s](+)\nsets=2", ErrSyntax,
			`pjsip.conf:5: section "s": syntax error: append (+) to a source: its options end with its section`},
		{"collision with the file", "[gw1]\ntype=aor\ncontact=sip:192.0.2.9\n[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC", ErrDuplicate,
			`http://h/RPC dispatcher.list:1: section "gw1": duplicate section: a second aor named "gw1" (the first is at pjsip.conf:1)`},
		{"overlay of nothing", "[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC\n[gw9](+type=aor)\nqualify_failures=2", ErrNoSection,
			`pjsip.conf:5: section "gw9": no such section: append (+type=aor) matches no section defined before`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("pjsip.conf", []byte(tc.src), Options{Import: gateways("gw1", "gw2")})
			if !errors.Is(err, tc.is) || err.Error() != tc.want {
				t.Fatalf("error\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestSourceCollisions: two sources, or a source and the file, defining
// one name is an error naming both places.
func TestSourceCollisions(t *testing.T) {
	two := "[a]\ntype=source\ndriver=kamailio\nurl=http://a/RPC\n[b]\ntype=source\ndriver=kamailio\nurl=http://b/RPC\n"
	_, err := Parse("q.conf", []byte(two), Options{Import: gateways("gw1")})
	want := `http://b/RPC dispatcher.list:1: section "gw1": duplicate section: a second aor named "gw1" (the first is at http://a/RPC dispatcher.list:1)`
	if !errors.Is(err, ErrDuplicate) || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	fileAfter := "[a]\ntype=source\ndriver=kamailio\nurl=http://a/RPC\n[gw1]\ntype=aor\ncontact=sip:192.0.2.9\n"
	_, err = Parse("q.conf", []byte(fileAfter), Options{Import: gateways("gw1")})
	want = `q.conf:5: section "gw1": duplicate section: a second aor named "gw1" (the first is at http://a/RPC dispatcher.list:1)`
	if !errors.Is(err, ErrDuplicate) || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
}

// TestSourceImport: imported AoRs start from the template, take the
// overlays after the source as written AoRs do, and the source is in
// Config.Sources with its defaults.
func TestSourceImport(t *testing.T) {
	src := gwTemplate + "[edge]\ntype=source\ndriver=kamailio\nurl=http://127.0.0.1:5071/RPC\nsets=1,2\ntemplate=gw\n" +
		"[gw2](+type=aor)\nqualify_failures=5\n"
	conf, err := Parse("q.conf", []byte(src), Options{Import: gateways("gw1", "gw2")})
	if err != nil {
		t.Fatal(err)
	}
	if len(conf.AoRs) != 2 {
		t.Fatalf("%d AoRs, want 2", len(conf.AoRs))
	}
	for i, want := range []int{3, 5} {
		a := conf.AoRs[i]
		p := a.PolicyValue()
		if p.Frequency != 30*time.Second || p.Failures != want || a.Contacts[0] != fmt.Sprintf("sip:192.0.2.%d:5060;transport=udp", i+1) {
			t.Errorf("%s: frequency %v failures %d contacts %v, want 30s %d", a.Name, p.Frequency, p.Failures, a.Contacts, want)
		}
	}
	s := conf.Sources[0]
	if s.Name != "edge" || s.Driver != "kamailio" || fmt.Sprint(s.Sets) != "[1 2]" || s.Template != "gw" ||
		s.RefreshInterval != DefaultRefreshInterval || s.Timeout != DefaultSourceTimeout || s.Line != 5 {
		t.Fatalf("source %+v", s)
	}
}

// TestSourceWithoutImport: without Options.Import a source imports
// nothing and an overlay after it is dropped, so that check-config
// without --connect reads the file.
func TestSourceWithoutImport(t *testing.T) {
	src := "[edge]\ntype=source\ndriver=dispatcher_file\npath=dispatcher.list\n[gw2](+type=aor)\nqualify_failures=5\n"
	conf, err := Parse("/etc/qualifyd/q.conf", []byte(src), Options{FS: fstest.MapFS{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(conf.AoRs) != 0 || conf.Sources[0].Path != "/etc/qualifyd/dispatcher.list" {
		t.Fatalf("AoRs %v, source %+v", conf.AoRs, conf.Sources[0])
	}
}

// TestSourceRefusesObjects: an object no file could hold is refused at
// its place.
func TestSourceRefusesObjects(t *testing.T) {
	for _, o := range []Object{
		{Type: "acl", Name: "x"},
		{Type: "aor", Name: "a]b"},
		{Type: "aor", Name: "a\nb"},
		{Type: "aor", Name: "x", Options: []KeyValue{{"type", "endpoint"}}},
	} {
		o.File, o.Line = "list", 7
		imp := func(*Source) ([]Object, error) { return []Object{o}, nil }
		_, err := Parse("q.conf", []byte("[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC"), Options{Import: imp})
		if !errors.Is(err, ErrSource) || !strings.HasPrefix(err.Error(), "list:7: ") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	fail := func(*Source) ([]Object, error) { return nil, errors.New("connection refused") }
	_, err := Parse("q.conf", []byte("[s]\ntype=source\ndriver=kamailio\nurl=http://h/RPC"), Options{Import: fail})
	if want := `q.conf:1: section "s": source error: connection refused`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestRealtimeSource: dsn_file's first line is the DSN, read relative to
// the configuration directory, and printed nowhere; dsn= and the
// dispatcher's options are refused.
func TestRealtimeSource(t *testing.T) {
	fsys := fstest.MapFS{
		"etc/qualifyd/realtime.dsn": {Data: []byte("postgres://qualifyd:s3cret@db/asterisk\nignored\n")},
		"etc/qualifyd/empty.dsn":    {Data: []byte("\n")},
	}
	conf, err := Parse("/etc/qualifyd/q.conf", []byte("[db]\ntype=source\ndriver=realtime\ndsn_file=realtime.dsn\nrefresh_interval=60\n"),
		Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	s := conf.Sources[0]
	if s.DSN.Reveal() != "postgres://qualifyd:s3cret@db/asterisk" || s.DSNFile != "realtime.dsn" ||
		s.Timeout != DefaultSourceTimeout || s.RefreshInterval != 60*time.Second {
		t.Fatalf("source %+v", s)
	}
	if shown := fmt.Sprintf("%v %+v %#v", s, s, s); strings.Contains(shown, "s3cret") {
		t.Fatalf("the DSN is printed: %s", shown)
	}
	for _, tc := range []struct{ src, want string }{
		{"dsn_file=missing.dsn", `q.conf:4: section "db": option "dsn_file": invalid value: cannot read missing.dsn: file does not exist`},
		{"dsn_file=empty.dsn", `q.conf:4: section "db": option "dsn_file": invalid value: empty.dsn: the first line is empty (want the connection string)`},
		{"dsn=postgres://u:pw@h/db", `q.conf:4: section "db": option "dsn": invalid value: a DSN holds the database password: write it in a file named by dsn_file=`},
		{"dsn_file=realtime.dsn\nsets=1", `q.conf:5: section "db": option "sets": unknown option: a realtime source has no option "sets"`},
		{"dsn_file=realtime.dsn\ntimeout=0", `q.conf:5: section "db": option "timeout": invalid value: "0": a read needs more than 0 seconds`},
		{"timeout=2", `q.conf:1: section "db": invalid value: driver=realtime needs dsn_file=`},
	} {
		_, err := Parse("/etc/qualifyd/q.conf", []byte("[db]\ntype=source\ndriver=realtime\n"+tc.src), Options{FS: fsys})
		if err == nil || strings.TrimPrefix(err.Error(), "/etc/qualifyd/") != tc.want || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestCheckObjects: imported values are checked as the file's, at the
// object's place; references outside the objects are not looked up.
func TestCheckObjects(t *testing.T) {
	good := []Object{
		{Type: "aor", Name: "gw1", File: "ps_aors", Line: 1, Options: []KeyValue{{"contact", "sip:192.0.2.1"}, {"qualify_frequency", "60"}}},
		{Type: "endpoint", Name: "gw1", File: "ps_endpoints", Line: 1, Options: []KeyValue{{"aors", "gw1,file-aor"}, {"transport", "t-udp"}, {"outbound_auth", "none"}}},
		{Type: "auth", Name: "a1", File: "ps_auths", Line: 1, Options: []KeyValue{{"username", "u"}}},
	}
	if err := CheckObjects(good); err != nil {
		t.Fatal(err)
	}
	bad := append(good, Object{Type: "aor", Name: "gw2", File: "ps_aors", Line: 2, Options: []KeyValue{{"qualify_frequency", "abc"}}})
	err := CheckObjects(bad)
	want := `ps_aors:2: section "gw2": option "qualify_frequency": invalid value: "abc"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %s...", err, want)
	}
}
