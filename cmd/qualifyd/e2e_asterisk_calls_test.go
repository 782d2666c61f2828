package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// TestAsteriskObserveCalls runs qualifyd with an ami sink that hears the
// calls (observe_calls=yes) beside the real Asterisk, which places a call
// through its dial plan to each of two SIPp trunks, one answering 200 and
// one 503: qualifyd's metrics count one answered and one failed
// observation from the Manager, and shows the watcher logged in in the
// metrics and the API. About 3 s.
func TestAsteriskObserveCalls(t *testing.T) {
	calls := filepath.Join("..", "..", "internal", "sink", "testdata", "calls")
	ok := callTrunk(t, filepath.Join("testdata", "kamailio", "trunk.xml"))
	busy := callTrunk(t, filepath.Join(calls, "invite-503.xml"))
	ast := peertest.NewAsterisk(t)
	ast.Write("manager.conf", fmt.Sprintf("[general]\nenabled = yes\nport = %d\nbindaddr = 127.0.0.1\n\n"+
		"[qualifyd]\nsecret = %s\nread = call\nwrite = call,system\n", ast.AMIPort, peertest.AMISecret))
	var pj, q strings.Builder
	fmt.Fprintf(&pj, "[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:%d\n", ast.SIPPort)
	for ep, dest := range map[string]string{"ok": ok, "busy": busy} {
		contact := strings.Replace(dest, "sip:", "sip:"+ep+"@", 1)
		fmt.Fprintf(&pj, "\n[%s]\ntype=endpoint\naors=%s\ncontext=in\ndisallow=all\nallow=ulaw\n\n[%s]\ntype=aor\ncontact=%s\nqualify_frequency=0\n", ep, ep, ep, contact)
		fmt.Fprintf(&q, "[%s]\ntype=endpoint\naors=%s\n\n[%s]\ntype=aor\ncontact=%s\nqualify_frequency=30\n\n", ep, ep, ep, contact)
	}
	ast.Write("pjsip.conf", pj.String())
	ast.Write("extensions.conf", "[out]\nexten => _[a-z].,1,Dial(PJSIP/${EXTEN},30)\n[in]\n")
	ast.Start()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ami.secret"), peertest.AMISecret+"\n")
	fmt.Fprintf(&q, "[asterisk]\ntype=sink\ndriver=ami\naddress=127.0.0.1:%d\nusername=qualifyd\nsecret_file=ami.secret\nobserve_calls=yes\n", ast.AMIPort)
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, conf, q.String())
	api := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	startDaemon(t, "--config", conf, "--http", api, "--sip-bind", "127.0.0.1:0").expect("qualifyd: started")
	metric := func(outcome string) string {
		return `qualifyd_observations_total{outcome="` + outcome + `",source="ami"} 1`
	}
	// The watcher logs in after the daemon starts: place calls until the
	// first is heard, then one to the other trunk.
	eventually(t, peerBound, "an answered call heard over the Manager", func() bool {
		if _, err := ast.CLI("channel originate Local/ok@out application Wait 1"); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(metricsText(t, api), `qualifyd_observations_total{outcome="answered",source="ami"}`)
	})
	if _, err := ast.CLI("channel originate Local/busy@out application Wait 1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, peerBound, "a failed call heard over the Manager", func() bool {
		return strings.Contains(metricsText(t, api), metric("failed"))
	})
	m := metricsText(t, api)
	if !strings.Contains(m, `qualifyd_observations_dropped_total{reason="malformed"} 0`) {
		t.Errorf("malformed events counted:\n%s", m)
	}
	if !strings.Contains(m, `qualifyd_sink_calls_up{sink="asterisk"} 1`) || !strings.Contains(m, `qualifyd_sink_calls_reconnects_total{sink="asterisk"} 0`) {
		t.Errorf("the call watcher's state is not in the metrics:\n%s", m)
	}
	if _, body := get(t, "GET", "http://"+api+"/api/v1/sinks/asterisk", ""); !strings.Contains(body, `"calls":{"up":true,"reconnects":0,"last_error":""}`) {
		t.Errorf("the call watcher's state is not in the API: %s", body)
	}
}

// metricsText returns qualifyd's /metrics.
func metricsText(t *testing.T, api string) string {
	t.Helper()
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
