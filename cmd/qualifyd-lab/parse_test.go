package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseQualifyd(t *testing.T) {
	proberOf := map[string]string{"qualifyd-n1": proberN1}
	line := `{"time":"2026-11-29T15:45:36.609529955Z","level":"INFO","msg":"Contact qualifyd-n1/sip:qualifyd-n1@10.200.6.2:5060 is now Unreachable.  RTT: 0.000 msec","event":"status","seq":4,"aor":"qualifyd-n1","from":"Reachable","to":"Unreachable","routable":false}`
	tr, reached, ok := parseQualifyd([]byte(line), proberOf)
	want := transition{Prober: proberN1, At: time.Date(2026, 11, 29, 15, 45, 36, 609529955, time.UTC)}
	if !ok || reached || tr.Prober != want.Prober || !tr.At.Equal(want.At) || tr.Up {
		t.Errorf("got %+v reached %v ok %v, want %+v", tr, reached, ok, want)
	}
	for _, other := range []string{
		`{"time":"2026-11-29T15:45:36Z","event":"failure","aor":"qualifyd-n1","routable":true}`,
		`{"time":"2026-11-29T15:45:36Z","event":"status","aor":"unknown","routable":true}`,
		`{"time":"2026-11-29T15:45:36Z","level":"INFO","msg":"qualifyd: started"}`,
		`not json`,
	} {
		if _, _, ok := parseQualifyd([]byte(other), proberOf); ok {
			t.Errorf("%s: parsed as a transition", other)
		}
	}
}

func TestParseKamailio(t *testing.T) {
	tr, ok := parseKamailio([]byte(` 4(14602) NOTICE: <script>: DSEVENT t=1795967131.999598 dst-down uri=sip:10.200.6.2:5060`), "k")
	if want := (transition{Prober: "k", At: time.Unix(1795967131, 999598000)}); !ok || tr != want {
		t.Errorf("got %+v %v, want %+v", tr, ok, want)
	}
	tr, ok = parseKamailio([]byte(` 1(14599) NOTICE: <script>: DSEVENT t=1795967135.505224 dst-up uri=sip:10.200.6.2:5060`), "k")
	if !ok || !tr.Up {
		t.Errorf("dst-up: got %+v %v", tr, ok)
	}
	if _, ok := parseKamailio([]byte(` 0(1) INFO: <core> [main.c:854]: sig_usr(): signal 15 received`), "k"); ok {
		t.Error("a core line parsed as a transition")
	}
}

func TestParseCounters(t *testing.T) {
	js := `{"nftables": [{"metainfo": {"version": "1.0.6"}},
		{"counter": {"family": "netdev", "name": "req_in_2", "table": "qdlab", "handle": 1, "packets": 32, "bytes": 9000}},
		{"counter": {"family": "netdev", "name": "req_dropped_2", "table": "qdlab", "handle": 2, "packets": 10, "bytes": 3000}},
		{"counter": {"family": "netdev", "name": "resp_out_2", "table": "qdlab", "handle": 3, "packets": 22, "bytes": 8000}},
		{"counter": {"family": "netdev", "name": "resp_dropped_2", "table": "qdlab", "handle": 4, "packets": 4, "bytes": 1000}}]}`
	got, err := parseCounters([]byte(js), 2)
	if want := (nftCounters{ReqIn: 32, ReqDropped: 10, RespOut: 22, RespDropped: 4}); err != nil || got != want {
		t.Errorf("got %+v %v, want %+v", got, err, want)
	}
	if got, err := parseCounters([]byte(js), 1); err != nil || got != (nftCounters{}) {
		t.Errorf("another phase's counters: got %+v %v, want none", got, err)
	}
	if _, err := parseCounters([]byte("{"), 0); err == nil {
		t.Error("broken JSON: no error")
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	w := &lineWriter{fn: func(l []byte) { lines = append(lines, string(l)) }}
	for _, chunk := range []string{"one\ntw", "o\n", "", "three\nfour\nfi", "ve"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if want := []string{"one", "two", "three", "four"}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %q, want %q (pending %q)", lines, want, w.buf)
	}
}

func TestSettingsFiles(t *testing.T) {
	s := fullSettings()
	conf := s.simConf()
	for _, want := range []string{
		"[qualifyd-n1]\ntype=aor\ncontact=sip:qualifyd-n1@10.200.6.2:5060\nqualify_frequency=2\nqualify_timeout=0.5\n",
		"[qualifyd-n3]\ntype=aor\ncontact=sip:qualifyd-n3@10.200.6.2:5060\nqualify_frequency=2\nqualify_timeout=0.5\nqualify_failures=3\nqualify_retry_interval=0.5\n",
		"[kamailio]\ntype=aor\ncontact=sip:kamailio@10.200.6.2:5060\nqualify_frequency=2\nqualify_timeout=0.5\nqualify_failures=3\nqualify_retry_interval=1.5\nqualify_down_interval=1.5\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("simulate.conf lacks\n%s\ngot\n%s", want, conf)
		}
	}
	if strings.Contains(s.qualifydConf(), "[kamailio]") {
		t.Error("the daemon's configuration probes a Kamailio AoR")
	}
	if err := s.validate(); err != nil {
		t.Errorf("full settings: %v", err)
	}
}

func TestParseLossy(t *testing.T) {
	s, asJSON, err := parseLossy([]string{"--loss", "5, 20,50", "--json", "--dead", "7s"}, &strings.Builder{})
	if err != nil || !asJSON || !reflect.DeepEqual(s.Losses, []int{5, 20, 50}) || s.Dead != 7*time.Second {
		t.Errorf("got %+v %v %v", s, asJSON, err)
	}
	if _, _, err := parseLossy([]string{"--loss", "5,x"}, &strings.Builder{}); err == nil {
		t.Error("--loss 5,x: no error")
	}
}
