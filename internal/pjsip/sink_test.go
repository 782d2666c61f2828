package pjsip

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const sinkAoRs = "[pbx07]\ntype=aor\ncontact=sip:192.0.2.7\nqualify_frequency=30\n"

func TestSinkErrors(t *testing.T) {
	files := map[string]string{"ami.secret": "s3cret\n", "empty.secret": "\n"}
	tests := []struct {
		name, src string
		is        error
		want      string
	}{
		{"no driver", "[a]\ntype=sink", ErrValue,
			`pjsip.conf:1: section "a": invalid value: a sink needs driver= (ami, kamailio or webhook)`},
		{"unknown driver", "[a]\ntype=sink\ndriver=sms", ErrValue,
			`pjsip.conf:3: section "a": option "driver": invalid value: "sms" is not a sink driver (ami, kamailio or webhook)`},
		{"unknown option", "[a]\ntype=sink\ndriver=kamailio\nurl=http://127.0.0.1:5071/RPC\naddress=x:1", ErrUnknownOption,
			`pjsip.conf:5: section "a": option "address": unknown option: a kamailio sink has no option "address"`},
		{"missing url", "[a]\ntype=sink\ndriver=webhook", ErrValue,
			`pjsip.conf:1: section "a": invalid value: driver=webhook needs url=`},
		{"missing address", "[a]\ntype=sink\ndriver=ami\nusername=q\nsecret=x", ErrValue,
			`pjsip.conf:1: section "a": invalid value: driver=ami needs address=`},
		{"missing secret", "[a]\ntype=sink\ndriver=ami\naddress=127.0.0.1:5038\nusername=q", ErrValue,
			`pjsip.conf:1: section "a": invalid value: an ami sink needs secret_file= (or secret=)`},
		{"both secrets", "[a]\ntype=sink\ndriver=ami\naddress=127.0.0.1:5038\nusername=q\nsecret=x\nsecret_file=ami.secret", ErrValue,
			`pjsip.conf:7: section "a": option "secret_file": invalid value: give secret= or secret_file=, not both`},
		{"unreadable secret file", "[a]\ntype=sink\ndriver=webhook\nurl=http://h/\nsecret_file=/etc/none.secret", ErrValue,
			`pjsip.conf:5: section "a": option "secret_file": invalid value: cannot read /etc/none.secret: file does not exist`},
		{"empty secret file", "[a]\ntype=sink\ndriver=webhook\nurl=http://h/\nsecret_file=empty.secret", ErrValue,
			`pjsip.conf:5: section "a": option "secret_file": invalid value: empty.secret: the secret is empty`},
		{"observe_calls on a kamailio sink", "[a]\ntype=sink\ndriver=kamailio\nurl=http://h/\nobserve_calls=yes", ErrUnknownOption,
			`pjsip.conf:5: section "a": option "observe_calls": unknown option: a kamailio sink has no option "observe_calls"`},
		{"bad observe_calls", "[a]\ntype=sink\ndriver=ami\naddress=h:1\nusername=q\nsecret=x\nobserve_calls=maybe", ErrValue,
			`pjsip.conf:7: section "a": option "observe_calls": invalid value: "maybe" is not a boolean (yes or no)`},
		{"bad address", "[a]\ntype=sink\ndriver=ami\naddress=localhost", ErrValue,
			`pjsip.conf:4: section "a": option "address": invalid value: "localhost" is not host:port`},
		{"bad port", "[a]\ntype=sink\ndriver=ami\naddress=h:70000", ErrValue,
			`pjsip.conf:4: section "a": option "address": invalid value: "70000" is out of range: must be between 1 and 65535`},
		{"bad url", "[a]\ntype=sink\ndriver=kamailio\nurl=ftp://h/", ErrValue,
			`pjsip.conf:4: section "a": option "url": invalid value: "ftp://h/" is not an http:// or https:// URL`},
		{"url credentials", "[a]\ntype=sink\ndriver=kamailio\nurl=http://u:p@h/", ErrValue,
			`pjsip.conf:4: section "a": option "url": invalid value: the URL must not carry credentials`},
		{"bad auth", "[a]\ntype=sink\ndriver=ami\nauth=sha1", ErrValue,
			`pjsip.conf:4: section "a": option "auth": invalid value: "sha1" is not one of md5, plain`},
		{"bad method", "[a]\ntype=sink\ndriver=ami\nmethod=hangup", ErrValue,
			`pjsip.conf:4: section "a": option "method": invalid value: "hangup" is not one of devstate, maintenance`},
		{"bad tls", "[a]\ntype=sink\ndriver=ami\ntls=maybe", ErrValue,
			`pjsip.conf:4: section "a": option "tls": invalid value: "maybe" is not a boolean (yes or no)`},
		{"bad interval", "[a]\ntype=sink\ndriver=kamailio\nresync_interval=-1", ErrValue,
			`pjsip.conf:4: section "a": option "resync_interval": invalid value: "-1" is out of range: must be between 0 and 86400 seconds`},
		{"zero timeout", "[a]\ntype=sink\ndriver=webhook\ntimeout=0", ErrValue,
			`pjsip.conf:4: section "a": option "timeout": invalid value: "0": a request needs a timeout of more than 0 seconds`},
		{"zero failopen", "[a]\ntype=sink\ndriver=ami\nfailopen_after=0", ErrValue,
			`pjsip.conf:4: section "a": option "failopen_after": invalid value: "0": the fail-open window must be more than 0 seconds`},
		{"maintenance without heartbeat", "[a]\ntype=sink\ndriver=ami\naddress=h:5038\nusername=q\nsecret=x\nmethod=maintenance\nheartbeat_interval=0", ErrValue,
			`pjsip.conf:8: section "a": option "heartbeat_interval": invalid value: method=maintenance needs a heartbeat: Asterisk keeps an endpoint in maintenance until told otherwise, and ` + "`qualifyd guard`" + ` releases it only when the heartbeat goes stale`},
		{"failopen under 3 heartbeats", "[a]\ntype=sink\ndriver=ami\naddress=h:5038\nusername=q\nsecret=x\nheartbeat_interval=15", ErrValue,
			`pjsip.conf:7: section "a": option "heartbeat_interval": invalid value: failopen_after (40) must be at least 3 x heartbeat_interval (15), or the router fails open after two lost heartbeats`},
		{"webhook failopen under 3 heartbeats", "[a]\ntype=sink\ndriver=webhook\nurl=http://h/\nfailopen_after=20", ErrValue,
			`pjsip.conf:5: section "a": option "failopen_after": invalid value: failopen_after (20) must be at least 3 x heartbeat_interval (10), or the router fails open after two lost heartbeats`},
		{"kamailio failopen under 3 heartbeats", "[a]\ntype=sink\ndriver=kamailio\nurl=http://127.0.0.1:5071/RPC\nfailopen_after=20", ErrValue,
			`pjsip.conf:5: section "a": option "failopen_after": invalid value: failopen_after (20) must be at least 3 x heartbeat_interval (10), or the router fails open after two lost heartbeats`},
		{"webhook reassert", "[a]\ntype=sink\ndriver=webhook\nreassert_interval=60", ErrUnknownOption,
			`pjsip.conf:4: section "a": option "reassert_interval": unknown option: a webhook sink does not reassert: it delivers each change once`},
		{"empty aors", "[a]\ntype=sink\ndriver=webhook\naors= , ", ErrValue,
			`pjsip.conf:4: section "a": option "aors": invalid value: aors= lists no AoR`},
		{"unknown aor", sinkAoRs + "[a]\ntype=sink\ndriver=webhook\nurl=http://h/\naors=pbx07,pbx99", ErrReference,
			`pjsip.conf:5: section "a": option "aors": missing reference: no AoR "pbx99"`},
		{"duplicate sink", "[a]\ntype=sink\ndriver=webhook\nurl=http://h/\n[a]\ntype=sink\ndriver=webhook\nurl=http://h/", ErrDuplicate,
			`pjsip.conf:5: section "a": duplicate section: a second sink named "a" (the first is at pjsip.conf:1)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFiles(tt.src, files)
			if err == nil || err.Error() != tt.want || !errors.Is(err, tt.is) {
				t.Fatalf("error\n got %v\nwant %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestSinkDefaults(t *testing.T) {
	src := sinkAoRs + `[asterisk]
type=sink
driver=ami
address=127.0.0.1:5038
username=qualifyd
secret_file=ami.secret
observe_calls=yes
[edge]
type=sink
driver=kamailio
url=http://127.0.0.1:5071/RPC
aors=pbx07
timeout=2.5
[alerts]
type=sink
driver=webhook
url=https://hooks.example.net/qualifyd
secret=k
`
	cfg, err := parseFiles(src, map[string]string{"ami.secret": "s3cret\r\nignored\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Sink{
		{Name: "asterisk", Driver: "ami", File: "pjsip.conf", Line: 5, ReassertInterval: 300 * time.Second,
			Timeout: 5 * time.Second, Address: "127.0.0.1:5038", Username: "qualifyd", Secret: "s3cret",
			SecretFile: "ami.secret", Auth: "md5", DevicePrefix: "Custom:", Method: "devstate", HeartbeatInterval: 10 * time.Second,
			FailOpenAfter: 40 * time.Second, ObserveCalls: true},
		{Name: "edge", Driver: "kamailio", File: "pjsip.conf", Line: 12, AoRs: []string{"pbx07"},
			ReassertInterval: 300 * time.Second, Timeout: 2500 * time.Millisecond, URL: "http://127.0.0.1:5071/RPC",
			ResyncInterval: 30 * time.Second, HeartbeatInterval: 10 * time.Second, FailOpenAfter: 40 * time.Second},
		{Name: "alerts", Driver: "webhook", File: "pjsip.conf", Line: 18, Timeout: 5 * time.Second,
			URL: "https://hooks.example.net/qualifyd", Secret: "k", HeartbeatInterval: 10 * time.Second,
			FailOpenAfter: 40 * time.Second},
	}
	if len(cfg.Sinks) != len(want) {
		t.Fatalf("got %d sinks, want %d", len(cfg.Sinks), len(want))
	}
	for i := range want {
		if !cfg.Sinks[i].Equal(&want[i]) || cfg.Sinks[i].Line != want[i].Line {
			t.Errorf("sink %d:\n got %#v\nwant %#v", i, *cfg.Sinks[i], want[i])
		}
	}
}

// TestPanicOptions reads the global panic rule: the defaults, and the
// last value of each option across global sections.
func TestPanicOptions(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      Panic
	}{
		{"defaults", "[global]\ntype=global\n", Panic{Threshold: 50, MinDestinations: 10, HoldThreshold: 10}},
		{"no global", "", Panic{Threshold: 50, MinDestinations: 10, HoldThreshold: 10}},
		{"set", "[global]\ntype=global\npanic_threshold=100\npanic_min_destinations=3\npanic_hold_threshold=1\n", Panic{Threshold: 100, MinDestinations: 3, HoldThreshold: 1}},
		{"last wins", "[global]\ntype=global\npanic_threshold=70\n[global](+)\npanic_threshold=60\n", Panic{Threshold: 60, MinDestinations: 10, HoldThreshold: 10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseFiles(c.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Panic != c.want {
				t.Fatalf("panic %+v, want %+v", cfg.Panic, c.want)
			}
		})
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	s := Sink{Name: "a", Secret: "s3cret"}
	b, _ := json.Marshal(s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s.Secret), string(b)} {
		if strings.Contains(out, "s3cret") {
			t.Fatalf("printed the secret: %s", out)
		}
	}
	if s.Secret.Reveal() != "s3cret" {
		t.Fatal("Reveal lost the secret")
	}
}
