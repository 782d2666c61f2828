package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// The real peers of the Kamailio end-to-end tests: Kamailio (the router
// whose dispatcher qualifyd's kamailio sink drives) and SIPp (the trunks
// and the caller), started on loopback and stopped when the test ends.
// `make deps` installs both; a missing peer fails the test, never skips it.

// peerBound bounds every wait on a peer: it only stops a broken run from
// hanging the suite, and never decides a result.
const peerBound = 10 * time.Second

// The peers' helpers, shared with the other interop tests.
var (
	requirePeer = peertest.Require
	freePort    = peertest.FreePort
	startPeer   = peertest.Start
)

// syncBuffer is a peer's output, readable while the peer writes it.
type syncBuffer = peertest.Output

// eventually polls cond every 20 ms until it holds; the test fails if it
// does not within bound.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		<-tick.C
	}
}

// kamailio is a running Kamailio with the testdata configuration.
type kamailio struct {
	t   *testing.T
	sip string // host:port of its UDP SIP listener
	rpc string // its JSON-RPC URL
	ctl string // its ctl (binrpc) socket, for kamcmd
	log *syncBuffer
}

// startKamailio runs Kamailio in the foreground with dispatcher set 1 =
// the trunks, in priority order, and waits until its RPC answers.
func startKamailio(t *testing.T, trunks ...*trunk) *kamailio {
	t.Helper()
	dir := t.TempDir()
	// "SETID URI FLAGS PRIORITY": flags 0, not 8 (probing), since qualifyd
	// probes; a higher priority is tried first.
	var list strings.Builder
	for i, tr := range trunks {
		fmt.Fprintf(&list, "1 %s 0 %d\n", tr.dest, 10*(len(trunks)-i))
	}
	dslist := filepath.Join(dir, "dispatcher.list")
	writeFile(t, dslist, list.String())
	cfg, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	pk := peertest.StartKamailio(t, cfg, dslist)
	k := &kamailio{t: t, sip: pk.SIP, rpc: pk.RPC, ctl: pk.Ctl, log: pk.Log}
	return k
}

// call makes one JSON-RPC 2.0 request and returns its result. peerBound
// only stops a hung call: a slow answer on a loaded host is an answer,
// never an error sample or a failed read.
func (k *kamailio) call(method string, params ...any) (json.RawMessage, error) {
	req := map[string]any{"jsonrpc": "2.0", "method": method, "id": 1}
	if len(params) > 0 {
		req["params"] = params
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), peerBound)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "POST", k.rpc, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var rep struct {
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %w", method, resp.StatusCode, err)
	}
	if rep.Error != nil {
		return nil, fmt.Errorf("%s: error %d: %s", method, rep.Error.Code, rep.Error.Message)
	}
	return rep.Result, nil
}

// states reads dispatcher.list: each destination URI's state, the first
// letter of its FLAGS (A active, I inactive, D disabled, T trying).
func (k *kamailio) states() (map[string]string, error) {
	raw, err := k.call("dispatcher.list")
	if err != nil {
		return nil, err
	}
	var list struct {
		RECORDS []struct {
			SET struct {
				TARGETS []struct {
					DEST struct{ URI, FLAGS string }
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("dispatcher.list: %w: %s", err, raw)
	}
	st := map[string]string{}
	for _, rec := range list.RECORDS {
		for _, tg := range rec.SET.TARGETS {
			st[tg.DEST.URI] = tg.DEST.FLAGS[:min(1, len(tg.DEST.FLAGS))]
		}
	}
	return st, nil
}

// state is the state of destination uri ("" if it is not listed).
func (k *kamailio) state(uri string) string {
	k.t.Helper()
	st, err := k.states()
	if err != nil {
		k.t.Fatal(err)
	}
	return st[uri]
}

// setState is `dispatcher.set_state STATE 1 URI` over JSON-RPC, as the
// sink pushes it.
func (k *kamailio) setState(state, uri string) {
	k.t.Helper()
	if _, err := k.call("dispatcher.set_state", state, 1, uri); err != nil {
		k.t.Fatal(err)
	}
}

// reload is `kamcmd dispatcher.reload`: Kamailio reads its list file
// again, which resets every destination to active.
func (k *kamailio) reload() {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), peerBound)
	defer cancel()
	out, err := exec.CommandContext(ctx, requirePeer(k.t, "kamcmd"), "-s", k.ctl, "dispatcher.reload").CombinedOutput()
	if err != nil {
		k.t.Fatalf("kamcmd dispatcher.reload: %v\n%s", err, out)
	}
}

// routes are Kamailio's DSROUTE log lines so far, one per routing attempt
// of an INVITE, without the Call-ID: "first du=URI", "failover du=URI" or
// "none".
func (k *kamailio) routes() []string {
	var r []string
	for _, line := range strings.Split(k.log.String(), "\n") {
		if _, after, ok := strings.Cut(line, "DSROUTE "); ok {
			f := slices.DeleteFunc(strings.Fields(after), func(s string) bool { return strings.HasPrefix(s, "ci=") })
			r = append(r, strings.Join(f, " "))
		}
	}
	return r
}

// sampler reads one destination's state over and over, in the background.
type sampler struct {
	stop, done chan struct{}
	once       sync.Once
	mu         sync.Mutex  // holds samples and at while sampling
	samples    []string    // a state, or the error of a failed read
	at         []time.Time // when each sample's reply came: Kamailio held the state by then
}

// watch samples uri's state until the returned sampler is ended (at the
// latest when the test ends).
func (k *kamailio) watch(uri string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			st, err := k.states()
			s.mu.Lock()
			if err != nil {
				s.samples = append(s.samples, err.Error())
			} else {
				s.samples = append(s.samples, st[uri])
			}
			s.at = append(s.at, time.Now())
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	k.t.Cleanup(s.halt)
	return s
}

// halt stops sampling; idempotent.
func (s *sampler) halt() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// first waits for the first sample that read want and came back after
// since, stops sampling and returns when that sample's reply came:
// Kamailio's state as its own replies record it, whatever the test did
// between two of its reads. The test fails if no sample reads want
// within peerBound.
func (s *sampler) first(t *testing.T, uri, want string, since time.Time) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, peerBound, uri+" sampled "+want, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, st := range s.samples {
			if st == want && s.at[i].After(since) {
				at = s.at[i]
				return true
			}
		}
		return false
	})
	s.halt()
	return at
}

// end stops sampling and fails the test unless every sample was want.
func (s *sampler) end(t *testing.T, uri, want string) {
	t.Helper()
	s.halt()
	if len(s.samples) == 0 || slices.ContainsFunc(s.samples, func(st string) bool { return st != want }) {
		t.Fatalf("%s in dispatcher.list, sampled in order: %s; want %q throughout", uri, runs(s.samples), want)
	}
	t.Logf("%s was %q in all %d samples", uri, want, len(s.samples))
}

// runs writes samples as runs of equal values: `12 x "A", 3 x "I"`.
func runs(samples []string) string {
	var out []string
	for i := 0; i < len(samples); {
		j := i
		for j < len(samples) && samples[j] == samples[i] {
			j++
		}
		out = append(out, fmt.Sprintf("%d x %q", j-i, samples[i]))
		i = j
	}
	return strings.Join(out, ", ")
}

// trunk is a SIPp UAS behind its relay: dest is its dispatcher
// destination, contact the URI qualifyd probes; both are the relay's
// address.
type trunk struct {
	name, dest, contact string
	relay               *relay
}

// startTrunk runs SIPp with the trunk scenario behind a relay, and waits
// until it answers an OPTIONS.
func startTrunk(t *testing.T, name string) *trunk {
	t.Helper()
	sippAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(freePort(t, "udp")))
	r := newRelay(t, sippAddr)
	addr := r.Addr().String()
	tr := &trunk{name: name, dest: "sip:" + addr, contact: "sip:" + name + "@" + addr, relay: r}
	sf, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "trunk.xml"))
	startPeer(t, "sipp", "-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(int(sippAddr.Port())), "-t", "u1",
		"-nostdin", "-deadcall_wait", "0", "-max_recv_loops", "1000", "-key", "contact", addr)
	waitOptions(t, addr)
	return tr
}

// waitOptions sends OPTIONS to addr until one is answered, so that the
// first probe of a test never finds SIPp still starting.
func waitOptions(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().String()
	buf := make([]byte, 4096)
	eventually(t, peerBound, "SIPp at "+addr+" answers OPTIONS", func() bool {
		fmt.Fprintf(c, "OPTIONS sip:%s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bK-ready-%d\r\n"+
			"From: <sip:test@%s>;tag=ready\r\nTo: <sip:%s>\r\nCall-ID: ready-%d@%s\r\nCSeq: 1 OPTIONS\r\n"+
			"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n", addr, local, time.Now().UnixNano(), local, addr, time.Now().UnixNano(), local)
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		return err == nil && bytes.HasPrefix(buf[:n], []byte("SIP/2.0 200"))
	})
}

// placeCall runs one SIPp call to Kamailio and fails the test unless it
// completes (INVITE answered 200, ACK, BYE answered 200).
func placeCall(t *testing.T, k *kamailio) {
	t.Helper()
	sf, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "caller.xml"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*peerBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, requirePeer(t, "sipp"), "-sf", sf, "-i", "127.0.0.1",
		"-p", strconv.Itoa(freePort(t, "udp")), "-t", "u1", "-m", "1", "-s", "trunk", "-nostdin",
		"-timeout", peerBound.String(), "-timeout_error", "-max_recv_loops", "1000", k.sip)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("SIPp call through Kamailio failed: %v\n%s\nKamailio:\n%s", err, out, k.log)
	}
}
