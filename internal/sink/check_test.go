package sink

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// checkConf is a configuration of two trunks and the sinks text.
func checkConf(t *testing.T, sinks string) *pjsip.Config {
	t.Helper()
	conf, err := pjsip.Parse("qualifyd.conf", []byte("[a]\ntype=aor\ncontact=sip:a@127.0.0.1:5081\nqualify_frequency=30\n"+
		"[b]\ntype=aor\ncontact=sip:b@127.0.0.1:5099\nqualify_frequency=30\n"+
		"[a]\ntype=endpoint\naors=a\n[b]\ntype=endpoint\naors=b\n"+sinks), pjsip.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestCheckAMI: the check logs in and asks ListCommands whether the
// Manager user may run what the sink sends, naming what it may not.
func TestCheckAMI(t *testing.T) {
	const sink = "[pbx]\ntype=sink\ndriver=ami\naddress=pbx:5038\nusername=qualifyd\nsecret=s3cret\n"
	tests := []struct {
		name, sink string
		perms      []string
		found, err string
	}{
		{"devstate", sink, []string{"call", "system"}, "logged in as qualifyd; may run Setvar and DBPut", ""},
		{"no heartbeat", sink + "heartbeat_interval=0\n", []string{"call"}, "logged in as qualifyd; may run Setvar", ""},
		{"read only", sink, []string{}, "",
			`ami pbx:5038: user "qualifyd" may not run Setvar and DBPut: give it write=call,system in manager.conf`},
		{"maintenance without system", sink + "method=maintenance\n", []string{"call"}, "",
			`ami pbx:5038: user "qualifyd" may not run PJSIPSetMaintenance, PJSIPShowMaintenance and DBPut: give it write=call,system in manager.conf`},
		{"wrong secret", strings.Replace(sink, "s3cret", "wrong", 1), nil, "", "ami pbx:5038: login: Login: Authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeManager("s3cret")
			f.perms = tt.perms
			got := Check(t.Context(), checkConf(t, tt.sink), f.dial)
			if len(got) != 1 {
				t.Fatalf("%d results", len(got))
			}
			r := got[0]
			if r.Found != tt.found || (r.Err == nil) != (tt.err == "") || r.Err != nil && r.Err.Error() != tt.err {
				t.Fatalf("found %q, error %v; want %q, %q", r.Found, r.Err, tt.found, tt.err)
			}
			if r.Objects != 2 || r.Name != "pbx" || r.Driver != "ami" {
				t.Errorf("result %+v, want the two devices of sink pbx", r)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, m := range f.actions {
				if act := m["Action"]; act != "Challenge" && act != "Login" && act != "ListCommands" {
					t.Errorf("the check sent %s: it must change nothing", act)
				}
			}
		})
	}
}

// TestCheckKamailio: against a real Kamailio, the check reads
// dispatcher.list and names the sink's hosts it does not list.
func TestCheckKamailio(t *testing.T) {
	dir, _ := filepath.Abs("../../cmd/qualifyd/testdata/kamailio")
	k := startKamailio(t, filepath.Join(dir, "dispatcher.list"))
	conf := checkConf(t, "[lb]\ntype=sink\ndriver=kamailio\nurl="+k.URL+"\n[hook]\ntype=sink\ndriver=webhook\nurl=http://127.0.0.1:9/\n")
	got := Check(t.Context(), conf, nil)
	if len(got) != 2 {
		t.Fatalf("%d results", len(got))
	}
	if r := got[0]; r.Err != nil || r.Found != "dispatcher.list has 1 of the 2 hosts" || !slices.Equal(r.Unlisted, []string{"127.0.0.1:5099"}) {
		t.Errorf("kamailio: %+v", r)
	}
	if r := got[1]; r.Err == nil || r.Objects != 6 {
		t.Errorf("webhook: %+v, want unreachable, with its 2 contacts, 2 AoRs and 2 endpoints", r)
	}
	conf.Sinks[0].URL = "http://127.0.0.1:9/RPC" // nothing listens there
	if r := Check(t.Context(), conf, nil)[0]; r.Err == nil || !strings.Contains(r.Err.Error(), "127.0.0.1:9") {
		t.Errorf("unreachable kamailio: %+v", r)
	}
}

// TestCheckREADMEManagerConf: the Manager user of the README's
// manager.conf (cmd/qualifyd/testdata/sinks/manager.conf, which the
// README shows as it is) may run every action a sink sends, with either
// method, as Asterisk classes them.
func TestCheckREADMEManagerConf(t *testing.T) {
	b, err := os.ReadFile("../../cmd/qualifyd/testdata/sinks/manager.conf")
	if err != nil {
		t.Fatal(err)
	}
	_, user, ok := strings.Cut(string(b), "\n[qualifyd]\n")
	if !ok {
		t.Fatal("manager.conf has no [qualifyd] user")
	}
	var perms []string
	for line := range strings.Lines(user) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "write ="); ok {
			for _, p := range strings.Split(v, ",") {
				perms = append(perms, strings.TrimSpace(p))
			}
		}
	}
	if len(perms) == 0 {
		t.Fatal("the [qualifyd] user has no write= line")
	}
	for _, method := range []string{"devstate", "maintenance"} {
		f := newFakeManager("s3cret")
		f.perms = perms
		conf := checkConf(t, "[pbx]\ntype=sink\ndriver=ami\naddress=pbx:5038\nusername=qualifyd\nsecret=s3cret\nmethod="+method+"\n")
		if r := Check(t.Context(), conf, f.dial)[0]; r.Err != nil {
			t.Errorf("method=%s with write = %s: %v", method, strings.Join(perms, ","), r.Err)
		}
	}
}

// TestCheckWebhook: the check connects to the receiver (verifying its
// certificate for https) and sends it nothing; a receiver nobody
// answers for, or one whose certificate does not verify, fails it.
func TestCheckWebhook(t *testing.T) {
	var requests atomic.Int32
	count := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) })
	plain := httptest.NewServer(count)
	defer plain.Close()
	selfSigned := httptest.NewTLSServer(count)
	defer selfSigned.Close()
	closed := httptest.NewServer(count)
	closed.Close()
	host := strings.TrimPrefix(plain.URL, "http://")
	for _, tc := range []struct{ url, found, err string }{
		{plain.URL + "/hook", "connected to " + host + "; nothing sent", ""},
		{selfSigned.URL + "/hook/s3cret", "", "webhook " + selfSigned.URL + "/xxxxx: TLS: tls: failed to verify certificate"},
		{closed.URL + "/hook?token=s3cret", "", "webhook " + closed.URL + "/xxxxx?xxxxx: dial tcp " + strings.TrimPrefix(closed.URL, "http://") + ": connect: connection refused"},
	} {
		got := Check(t.Context(), checkConf(t, "[alerts]\ntype=sink\ndriver=webhook\nurl="+tc.url+"\n"), nil)
		if len(got) != 1 {
			t.Fatalf("%d results", len(got))
		}
		r := got[0]
		if r.Found != tc.found || (r.Err == nil) != (tc.err == "") || r.Err != nil && !strings.HasPrefix(r.Err.Error(), tc.err) {
			t.Errorf("%s: found %q, error %v; want %q, %q", tc.url, r.Found, r.Err, tc.found, tc.err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the receivers got %d requests, want none: a check tells a receiver nothing", n)
	}
}
