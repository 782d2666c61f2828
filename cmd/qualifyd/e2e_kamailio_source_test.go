package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/peertest"
)

// sourceRefresh is the source's refresh_interval: the bound within which
// an edit of dispatcher.list must be followed.
const sourceRefresh = 2 * time.Second

// TestKamailioSource: qualifyd with only a kamailio source and a kamailio
// sink, no AoR written by hand. The destinations of three dispatcher sets
// are qualified with the template's options (and one overlay's), a dead
// one is set inactive in Kamailio, a disabled one is never imported, and
// after an edit of the list and `kamcmd dispatcher.reload` the added
// destination is imported and the removed one's AoR, contact and sink
// object are gone within refresh_interval.
func TestKamailioSource(t *testing.T) {
	a, b, c, e := startTrunk(t, "a"), startTrunk(t, "b"), startTrunk(t, "c"), startTrunk(t, "e")
	dead := fmt.Sprintf("sip:127.0.0.1:%d", freePort(t, "udp"))
	dir := t.TempDir()
	dslist := filepath.Join(dir, "dispatcher.list")
	writeFile(t, dslist, fmt.Sprintf("# three sets\n1 %s 0 10 duid=gw-a\n1 %s 0 5\n2 %s\n2 sip:127.0.0.1:9 4\n3 %s\n",
		a.dest, dead, b.dest, c.dest))
	cfg, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	pk := peertest.StartKamailio(t, cfg, dslist)
	k := &kamailio{t: t, sip: pk.SIP, rpc: pk.RPC, ctl: pk.Ctl, log: pk.Log}
	conf := filepath.Join(dir, "qualifyd.conf")
	writeFile(t, conf, "[gw](!)\ntype=aor\n"+trunkQualify+
		fmt.Sprintf("[edge]\ntype=source\ndriver=kamailio\nurl=%s\ntemplate=gw\nrefresh_interval=%d\n", pk.RPC, int(sourceRefresh/time.Second))+
		"[gw-a](+type=aor)\nqualify_failures=4\n"+
		fmt.Sprintf("[edge-sink]\ntype=sink\ndriver=kamailio\nurl=%s\nresync_interval=%d\n", pk.RPC, int(resyncInterval/time.Second)))
	d := startDaemon(t, "--config", conf, "--http", "127.0.0.1:0", "--sip-bind", "127.0.0.1:0", "--state-file", filepath.Join(dir, "state"))
	base := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.expect("qualifyd: started"))[1]
	deadName := "ds1-127.0.0.1-" + dead[strings.LastIndexByte(dead, ':')+1:]
	bName, cName, eName := dsName(2, b), dsName(3, c), dsName(3, e)

	step(t, "1 imported with the template's options", func() {
		aors := listAoRs(t, base)
		if got, want := names(aors), sorted(bName, cName, deadName, "gw-a"); !slices.Equal(got, want) {
			t.Fatalf("AoRs %v, want %v", got, want)
		}
		for _, x := range aors {
			want := 3
			if x.Name == "gw-a" {
				want = 4
			}
			if x.Policy.Frequency != 1 || x.Policy.Failures != want || x.Policy.RetryInterval != 0.5 || len(x.Contacts) != 1 {
				t.Fatalf("%s: policy %+v, %d contacts; want frequency 1, failures %d, retry 0.5", x.Name, x.Policy, len(x.Contacts), want)
			}
		}
	})
	step(t, "2 the dead one inactive, the live ones active", func() {
		eventually(t, peerBound, dead+" inactive in dispatcher.list", func() bool { return k.state(dead) == "I" })
		for _, tr := range []*trunk{a, b, c} {
			if st := k.state(tr.dest); st != "A" {
				t.Fatalf("%s is %q, want A", tr.dest, st)
			}
		}
	})
	step(t, "3 an edit followed within refresh_interval", func() {
		writeFile(t, dslist, fmt.Sprintf("1 %s 0 10 duid=gw-a\n1 %s 0 5\n2 %s\n3 %s\n", a.dest, dead, b.dest, e.dest))
		k.reload()
		edited := time.Now()
		// When the edit applied, as qualifyd stamped the removal it made.
		took := lineStamp(t, d.expect("Contact "+cName+"/"+c.dest+" is now Removed.")).Sub(edited)
		t.Logf("the edit applied %v after dispatcher.reload, as qualifyd stamped it (refresh_interval %v)", took.Round(time.Millisecond), sourceRefresh)
		if took > 2*sourceRefresh+time.Second {
			t.Fatalf("the edit took %v to follow, refresh_interval is %v", took, sourceRefresh)
		}
		eventually(t, peerBound, "the edit imported", func() bool {
			return slices.Equal(names(listAoRs(t, base)), sorted(bName, deadName, eName, "gw-a"))
		})
		if code, body := get(t, "GET", base+"/api/v1/sinks/edge-sink", ""); code != 200 || strings.Contains(body, strings.TrimPrefix(c.dest, "sip:")) {
			t.Fatalf("sink objects after the edit: %d %s", code, body)
		}
		eventually(t, peerBound, dead+" inactive again after dispatcher.reload", func() bool { return k.state(dead) == "I" })
	})
	step(t, "4 the source's state in the API and the metrics", func() {
		code, body := get(t, "GET", base+"/api/v1/sources", "")
		var list api.SourceList
		if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Sources) != 1 {
			t.Fatalf("sources: %d %s", code, body)
		}
		if s := list.Sources[0]; s.Name != "edge" || !s.Up || s.AoRs != 4 || s.Driver != "kamailio" {
			t.Fatalf("source %+v", s)
		}
		_, metrics := get(t, "GET", base+"/metrics", "")
		for _, want := range []string{`qualifyd_source_up{source="edge"} 1`, `qualifyd_source_aors{source="edge"} 4`} {
			if !strings.Contains(metrics, want) {
				t.Fatalf("metrics lack %s", want)
			}
		}
	})
}

// dsName is the AoR a destination without duid becomes.
func dsName(set int, tr *trunk) string {
	hp := strings.TrimPrefix(tr.dest, "sip:")
	i := strings.LastIndexByte(hp, ':')
	return fmt.Sprintf("ds%d-%s-%s", set, hp[:i], hp[i+1:])
}

func listAoRs(t *testing.T, base string) []api.AoR {
	t.Helper()
	code, body := get(t, "GET", base+"/api/v1/aors", "")
	var page struct{ AoRs []api.AoR }
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
		t.Fatalf("aors: %d %v %s", code, err, body)
	}
	return page.AoRs
}

func names(aors []api.AoR) []string {
	out := []string{}
	for _, a := range aors {
		out = append(out, a.Name)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string { slices.Sort(s); return s }
