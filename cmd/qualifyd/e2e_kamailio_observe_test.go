package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/peertest"
)

// The kamailio.cfg lines that report call outcomes to qualifyd (those
// under OBSERVE_URL in testdata/kamailio/kamailio.cfg, which
// docs/routers.md gives), run in the real Kamailio with SIPp trunks.

// callTrunk runs SIPp on a free loopback port playing scenario (a file of
// ../../internal/sink/testdata/calls, or trunk.xml), waits until it has
// bound the port, and returns its dispatcher destination.
func callTrunk(t *testing.T, scenario string) string {
	t.Helper()
	sf, _ := filepath.Abs(scenario)
	port := freePort(t, "udp")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	startPeer(t, "sipp", "-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "u1",
		"-nostdin", "-deadcall_wait", "0", "-max_recv_loops", "1000", "-key", "contact", addr)
	eventually(t, peerBound, "SIPp binds "+addr, func() bool {
		c, err := net.ListenPacket("udp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	return "sip:" + addr
}

// observations is a receiver of POST /api/v1/observations that reads
// each body as qualifyd does (observe.ParseBatch) and keeps what it
// read, body by body; hang, if set, is closed to release requests it
// holds unanswered.
type observations struct {
	mu     sync.Mutex
	got    []observe.Observation
	bodies []int    // the observations of each body, in the order they came
	bad    []string // the requests qualifyd would refuse, and why
	drops  int
	hang   chan struct{}
}

func (o *observations) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.hang != nil {
		<-o.hang
		return
	}
	body, _ := io.ReadAll(r.Body)
	obs, tally, err := observe.ParseBatch(body)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, obs...)
	o.bodies = append(o.bodies, len(obs))
	o.drops += tally.Drops()
	if err != nil || r.URL.Path != "/api/v1/observations" || r.Header.Get("Content-Type") != "application/json" {
		why := fmt.Sprintf("%s %s: %v: %s", r.URL.Path, r.Header.Get("Content-Type"), err, body)
		o.bad = append(o.bad, why)
		http.Error(w, why, http.StatusBadRequest)
	}
}

func (o *observations) taken() ([]observe.Observation, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got), o.drops
}

// requests returns the observations of each body so far, and the
// requests refused.
func (o *observations) requests() ([]int, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.bodies), slices.Clone(o.bad)
}

// startObservingKamailio starts Kamailio with the observation lines
// (fr_timer 2 s) posting to url, and dispatcher set 1 the destinations,
// the first tried first.
func startObservingKamailio(t *testing.T, url string, dests ...string) *peertest.Kamailio {
	t.Helper()
	return startObservingKamailioDefs(t, url, nil, dests...)
}

// startObservingKamailioDefs is startObservingKamailio with defines
// (NAME=VALUE, as kamailio -A takes them) added.
func startObservingKamailioDefs(t *testing.T, url string, defines []string, dests ...string) *peertest.Kamailio {
	t.Helper()
	var list strings.Builder
	for i, d := range dests {
		fmt.Fprintf(&list, "1 %s 0 %d\n", d, 10*(len(dests)-i))
	}
	dslist := filepath.Join(t.TempDir(), "dispatcher.list")
	writeFile(t, dslist, list.String())
	cfg, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	defines = append([]string{"FR_TIMER=2000", fmt.Sprintf("OBSERVE_URL=%q", url+"/api/v1/observations")}, defines...)
	return peertest.StartKamailio(t, cfg, dslist, defines...)
}

// callThrough runs one SIPp call to Kamailio and reports whether it
// completed (INVITE answered 200, ACK, BYE answered 200).
func callThrough(t *testing.T, sip string) error {
	t.Helper()
	sf, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "caller.xml"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*peerBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, requirePeer(t, "sipp"), "-sf", sf, "-i", "127.0.0.1",
		"-p", strconv.Itoa(freePort(t, "udp")), "-t", "u1", "-m", "1", "-s", "trunk", "-nostdin",
		"-timeout", peerBound.String(), "-timeout_error", "-max_recv_loops", "1000", sip)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

// TestCallerTakesALateProvisional: the callers of the Kamailio tests
// complete a call when a 180 of its INVITE reaches them after the 200,
// while they wait for the BYE's answer, as Kamailio sends it on a
// loaded host (late-ringing.xml says how). It failed a fresh-clone run
// of TestKamailioQuietTrunk beside a CPU hog ("Aborting call on
// unexpected message ... 180 Ringing" while sending the BYE): caller.xml
// took a provisional only before its 200.
func TestCallerTakesALateProvisional(t *testing.T) {
	uas := newSippTrunkAt(t, freePort(t, "udp"), "", filepath.Join("testdata", "kamailio", "late-ringing.xml"), false)
	if err := callThrough(t, uas.addr()); err != nil {
		t.Fatalf("the call with a late 180 did not complete: %v", err)
	}
}

// TestKamailioObservations relays one call through the real Kamailio's
// dispatcher over four trunks in turn: one that never answers (fr_timer
// 2 s), one that answers 503, one 503 with Retry-After: 20, and one that
// answers 200. qualifyd's POST /api/v1/observations receives, in the
// order of the attempts, timeout, failed 503, failed 503 with retry_after
// 20 and answered, each with its destination, in as many bodies as
// Kamailio's 100 ms timer posted them (the four are queued within a few
// milliseconds, after fr_timer, so usually one body, two when a tick
// falls between them), each a valid request that parses without a
// drop; the lines docs/routers.md gives are the configuration's. About
// 3 s.
func TestKamailioObservations(t *testing.T) {
	kam, err := os.ReadFile(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	excerptInFile(t, docText(t, "docs/routers.md"), "**Call outcomes.**", "QUALIFYD_POST", string(kam))
	calls := filepath.Join("..", "..", "internal", "sink", "testdata", "calls")
	dead := callTrunk(t, filepath.Join(calls, "invite-silent.xml"))
	busy := callTrunk(t, filepath.Join(calls, "invite-503.xml"))
	draining := callTrunk(t, filepath.Join(calls, "invite-503-retry.xml"))
	ok := callTrunk(t, filepath.Join("testdata", "kamailio", "trunk.xml"))
	rec := &observations{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	k := startObservingKamailio(t, srv.URL, dead, busy, draining, ok)
	if err := callThrough(t, k.SIP); err != nil {
		t.Fatalf("the call did not complete over the fourth trunk: %v\nKamailio:\n%s", err, k.Log)
	}
	dest := func(uri string) string { d, _ := observe.Destination(uri); return d }
	want := []observe.Observation{
		{Destination: dest(dead), Outcome: observe.Timeout, Source: observe.SourceKamailio},
		{Destination: dest(busy), Outcome: observe.Failed, Code: 503, Source: observe.SourceKamailio},
		{Destination: dest(draining), Outcome: observe.Failed, Code: 503, RetryAfter: 20 * time.Second, Source: observe.SourceKamailio},
		{Destination: dest(ok), Outcome: observe.Answered, Source: observe.SourceKamailio},
	}
	eventually(t, peerBound, "four observations", func() bool { got, _ := rec.taken(); return len(got) >= len(want) })
	got, drops := rec.taken()
	if !slices.Equal(got, want) || drops != 0 {
		t.Fatalf("observations %+v (%d dropped), want %+v\nKamailio:\n%s", got, drops, want, k.Log)
	}
	bodies, bad := rec.requests()
	if len(bad) > 0 {
		t.Fatalf("bodies of %v observations, refused %q; want none refused", bodies, bad)
	}
	t.Logf("bodies of %v observations", bodies)
}

// TestKamailioObservationsQualifydHung holds that the lines never block
// routing: with qualifyd's API accepting connections but never
// answering, and with it gone (connection refused), a call over a dead
// trunk still fails over after fr_timer and completes, and Kamailio logs
// the lost POST: each POST is bounded (1 s), so that the timer posts the
// next calls' outcomes once qualifyd answers again. About 7 s.
func TestKamailioObservationsQualifydHung(t *testing.T) {
	calls := filepath.Join("..", "..", "internal", "sink", "testdata", "calls")
	dead := callTrunk(t, filepath.Join(calls, "invite-silent.xml"))
	ok := callTrunk(t, filepath.Join("testdata", "kamailio", "trunk.xml"))
	hung := &observations{hang: make(chan struct{})}
	srv := httptest.NewServer(hung)
	defer srv.Close()
	defer close(hung.hang)
	k := startObservingKamailio(t, srv.URL, dead, ok)
	for i := range 2 {
		if err := callThrough(t, k.SIP); err != nil {
			t.Fatalf("call %d with qualifyd hung: %v\nKamailio:\n%s", i, err, k.Log)
		}
	}
	eventually(t, peerBound, "Kamailio gives up a POST qualifyd does not answer", func() bool {
		return strings.Count(k.Log.String(), "qualifyd: POST of ") >= 2
	})
	gone := startObservingKamailio(t, "http://127.0.0.1:"+strconv.Itoa(freePort(t, "tcp")), dead, ok)
	if err := callThrough(t, gone.SIP); err != nil {
		t.Fatalf("call with qualifyd gone: %v\nKamailio:\n%s", err, gone.Log)
	}
	eventually(t, peerBound, "Kamailio logs the lost POST", func() bool {
		return strings.Contains(gone.Log.String(), "qualifyd: POST of ")
	})
}

// TestKamailioObservationsToken posts with the API token, as qualifyd
// off loopback requires: a real qualifyd with a token counts the call a
// Kamailio with OBSERVE_TOKEN reports, and answers 401 to a Kamailio
// without it, which logs the lost POST while its call completes as
// before. About 3 s.
func TestKamailioObservationsToken(t *testing.T) {
	t.Parallel()
	trunk := callTrunk(t, filepath.Join("testdata", "kamailio", "trunk.xml"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, "s3cret\n")
	apiAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	conf := callsConf(t, "", "trunk", strings.Replace(trunk, "sip:", "sip:trunk@", 1), "qualify_frequency=60\n")
	d := startDaemon(t, "--config", conf, "--http", apiAddr, "--token-file", tokenFile, "--sip-bind", "127.0.0.1:0")
	d.expect("qualifyd: started")
	const answered = `qualifyd_observations_total{outcome="answered",source="kamailio"}`
	with := startObservingKamailioDefs(t, "http://"+apiAddr, []string{`OBSERVE_TOKEN="s3cret"`}, trunk)
	if err := callThrough(t, with.SIP); err != nil {
		t.Fatalf("the call with the token: %v\nKamailio:\n%s", err, with.Log)
	}
	eventually(t, peerBound, "qualifyd counts the call Kamailio posted with the token", func() bool {
		return metric(t, "http://"+apiAddr, answered) == 1
	})
	if strings.Contains(with.Log.String(), "qualifyd: POST of ") {
		t.Fatalf("Kamailio with the token lost a POST:\n%s", with.Log)
	}
	without := startObservingKamailio(t, "http://"+apiAddr, trunk)
	if err := callThrough(t, without.SIP); err != nil {
		t.Fatalf("the call without the token: %v\nKamailio:\n%s", err, without.Log)
	}
	eventually(t, peerBound, "Kamailio without the token logs qualifyd's 401", func() bool {
		return strings.Contains(without.Log.String(), "qualifyd: POST of 1 observations: 401")
	})
	if n := metric(t, "http://"+apiAddr, answered); n != 1 {
		t.Errorf("qualifyd counted %v answered calls from Kamailio, want 1 (the POST without the token refused)", n)
	}
}

// queueSizes samples the length of Kamailio's qualifyd queue (RPC
// mqueue.get_size) every 20 ms until the returned stop is called, which
// returns the samples.
func queueSizes(t *testing.T, k *peertest.Kamailio) (stop func() []int) {
	rpc := &kamailio{t: t, rpc: k.RPC}
	var sizes []int
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if r, err := rpc.call("mqueue.get_size", "qualifyd"); err == nil {
				var q struct{ Size int }
				if json.Unmarshal(r, &q) == nil {
					sizes = append(sizes, q.Size)
				}
			}
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() []int { close(quit); <-done; return sizes }
}

// TestKamailioObservationsQueueFull holds that a full queue costs
// routing nothing and stays bounded: with qualifyd hung (its timer then
// drains 50 outcomes a second, one POST bounded by 1 s at a time), 1,500
// calls at 500 a second through the real Kamailio to a trunk answering
// 503 each get their final reply, and the queue of the docs' lines
// (size=1000) fills to 1,000 outcomes and never holds more (mq_add drops
// the oldest). About 4 s.
func TestKamailioObservationsQueueFull(t *testing.T) {
	t.Parallel()
	busy := callTrunk(t, filepath.Join("..", "..", "internal", "sink", "testdata", "calls", "invite-503.xml"))
	hung := &observations{hang: make(chan struct{})}
	srv := httptest.NewServer(hung)
	defer srv.Close()
	defer close(hung.hang)
	k := startObservingKamailio(t, srv.URL, busy)
	stop := queueSizes(t, k)
	sf, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "caller-fail.xml"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*peerBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, requirePeer(t, "sipp"), "-sf", sf, "-i", "127.0.0.1",
		"-p", strconv.Itoa(freePort(t, "udp")), "-t", "u1", "-r", "500", "-m", "1500", "-s", "trunk", "-nostdin",
		"-timeout", (2 * peerBound).String(), "-timeout_error", "-max_recv_loops", "1000", k.SIP)
	cmd.Dir = t.TempDir()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	sizes := stop()
	if err != nil {
		t.Fatalf("1,500 failed calls with qualifyd hung: %v\n%s", err, out)
	}
	if len(sizes) == 0 || slices.Max(sizes) != 1000 {
		t.Fatalf("the queue's length in %d samples: %v; want 1000 at most, reached", len(sizes), sizes)
	}
	t.Logf("1,500 failed calls in %.2f s, each with its final reply; the queue's length in %d samples: largest %d, last %d",
		took.Seconds(), len(sizes), slices.Max(sizes), sizes[len(sizes)-1])
}
