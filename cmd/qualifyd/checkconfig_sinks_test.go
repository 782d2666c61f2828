package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

const sinksConf = `[pbx07]
type=aor
contact=sip:pbx07@192.0.2.7:5060
qualify_frequency=30

[asterisk]
type=sink
driver=ami
address=127.0.0.1:5038
username=qualifyd
secret_file=ami.secret

[edge]
type=sink
driver=kamailio
url=http://127.0.0.1:5071/RPC
aors=pbx07

[alerts]
type=sink
driver=webhook
url=https://hooks.example.net/services/T0/s3cret-t0ken?key=s3cret-key
secret=inl1ne-s3cret
`

func TestCheckConfigSinks(t *testing.T) {
	dir := writeConfig(t, map[string]string{"q.conf": sinksConf, "ami.secret": "fil3-s3cret\n"})
	file := filepath.Join(dir, "q.conf")
	code, out, errOut := checkConfig(file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{
		"  sink asterisk  driver=ami address=127.0.0.1:5038 tls=no username=qualifyd auth=md5 method=devstate device_prefix=Custom: secret=file:ami.secret aors=all-qualified reassert=300s heartbeat=10s failopen=40s timeout=5s",
		"  sink edge  driver=kamailio url=http://127.0.0.1:5071/RPC aors=pbx07 reassert=300s resync=30s heartbeat=10s failopen=40s timeout=5s",
		"  sink alerts  driver=webhook url=https://hooks.example.net/xxxxx?xxxxx secret=inline aors=all-qualified heartbeat=10s failopen=40s timeout=5s",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := lines[len(lines)-3:]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sink lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantWarn := "qualifyd check-config: warning: " + file + `:19: section "alerts": secret= is in the file; secret_file= is the documented way` + "\n"
	if errOut != wantWarn {
		t.Fatalf("stderr %q, want %q", errOut, wantWarn)
	}
	code, js, _ := checkConfig("--json", file)
	var doc struct {
		Sinks []map[string]any `json:"sinks"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 || len(doc.Sinks) != 3 {
		t.Fatalf("exit %d, %v: %s", code, err, js)
	}
	if doc.Sinks[0]["secret"] != "file ami.secret" || doc.Sinks[2]["secret"] != "inline" || doc.Sinks[1]["aors"].([]any)[0] != "pbx07" {
		t.Fatalf("sinks %v", doc.Sinks)
	}
	for _, text := range []string{out, errOut, js} {
		if strings.Contains(text, "s3cret") {
			t.Fatalf("check-config printed a secret:\n%s", text)
		}
	}
}

// TestCheckConfigConnect: --connect reports each sink's router: a
// router (or a webhook's receiver) nobody answers for fails the check on
// stderr, naming the sink; --json and --connect do not go together.
func TestCheckConfigConnect(t *testing.T) {
	conf := strings.NewReplacer("127.0.0.1:5038", "127.0.0.1:9", "127.0.0.1:5071", "127.0.0.1:9",
		"https://hooks.example.net/", "http://127.0.0.1:9/").Replace(sinksConf)
	dir := writeConfig(t, map[string]string{"q.conf": conf, "ami.secret": "fil3-s3cret\n"})
	file := filepath.Join(dir, "q.conf")
	code, out, errOut := checkConfig("--connect", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"qualifyd check-config: sink asterisk (ami, 1 object): ami 127.0.0.1:9: ",
		"qualifyd check-config: sink edge (kamailio, 1 object): kamailio http://127.0.0.1:9/RPC: ",
		"qualifyd check-config: sink alerts (webhook, 2 objects): webhook http://127.0.0.1:9/xxxxx?xxxxx: dial tcp 127.0.0.1:9: connect: connection refused\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out+errOut, "s3cret") {
		t.Errorf("check-config --connect printed a secret:\n%s%s", out, errOut)
	}
	if code, _, _ := checkConfig("--connect", "--json", file); code != 2 {
		t.Errorf("--connect --json: exit %d, want 2", code)
	}
}

// TestCheckConfigConnectInACluster: in a cluster, --connect checks the
// sinks from this host and says to run it on every node, any of which
// may lead; a receiver that answers is reached without a request.
func TestCheckConfigConnectInACluster(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	defer srv.Close()
	conf := "[t]\ntype=aor\ncontact=sip:t@192.0.2.1\nqualify_frequency=30\n" +
		"[alerts]\ntype=sink\ndriver=webhook\nurl=" + srv.URL + "/hook\n" +
		"[c]\ntype=cluster\nnodes=a@127.0.0.1:6222,b@127.0.0.1:6223,c@127.0.0.1:6224\nstore=cluster-{node}\n"
	dir := writeConfig(t, map[string]string{"q.conf": conf})
	code, out, errOut := checkConfig("--connect", filepath.Join(dir, "q.conf"))
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, want := range []string{
		"sink alerts (webhook, 2 objects): OK: connected to " + host + "; nothing sent\n",
		"sinks checked from this host only: any node may lead, run check-config --connect on each of a, b and c\n",
		"NATS embedded, store cluster-{node},",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the receiver got %d requests, want none", n)
	}
}
