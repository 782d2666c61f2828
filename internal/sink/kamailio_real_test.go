package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// TestKamailioRealDispatcher runs the driver against a real Kamailio,
// started on loopback with the kamailio.cfg the README shows
// (cmd/qualifyd/testdata/kamailio).
func TestKamailioRealDispatcher(t *testing.T) {
	dir, _ := filepath.Abs("../../cmd/qualifyd/testdata/kamailio")
	k := startKamailio(t, filepath.Join(dir, "dispatcher.list"))
	level := mustResync(t, k)
	a, b := host("127.0.0.1:5081"), host("127.0.0.1:5082")
	if l, ok := level(a); !ok || l != Up {
		t.Fatalf("a is %v, %v at start", l, ok)
	}
	if _, ok := level(host("127.0.0.1:5083")); ok {
		t.Fatal("a destination in no set matched")
	}
	if err := k.push(t.Context(), Object{Key: a, Level: Down}); err != nil {
		t.Fatal(err)
	}
	level = mustResync(t, k)
	if la, _ := level(a); la != Down {
		t.Fatalf("a is %v after set_state i", la)
	}
	if lb, _ := level(b); lb != Up {
		t.Fatalf("b is %v: it was not pushed", lb)
	}
	if err := k.call(t.Context(), "dispatcher.reload", nil, nil); err != nil {
		t.Fatal(err)
	}
	if la, _ := mustResync(t, k)(a); la != Up {
		t.Fatalf("a is %v after dispatcher.reload", la)
	}
	err := k.call(t.Context(), "dispatcher.set_state", []any{"i", 1, "sip:127.0.0.1:5099"}, nil)
	if err == nil || err.Error() != "dispatcher.set_state: State Update Failed" {
		t.Fatalf("set_state of an unknown destination: %v", err)
	}
}

// TestKamailioRealEmptyDispatcher holds that a Kamailio with no
// destination sets, which answers dispatcher.list with the error "No
// Destination Sets", is read as an empty list: the sink is up and matches
// nothing, so it pushes nothing.
func TestKamailioRealEmptyDispatcher(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "dispatcher.list")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	k := startKamailio(t, empty)
	var list dispatcherList
	if err := k.call(t.Context(), "dispatcher.list", nil, &list); err == nil || err.Error() != "dispatcher.list: No Destination Sets" {
		t.Fatalf("dispatcher.list with no sets: %v; the driver expects Kamailio's error \"No Destination Sets\"", err)
	}
	level := mustResync(t, k)
	if l, ok := level(host("127.0.0.1:5081")); ok {
		t.Fatalf("a destination matched an empty list: %v", l)
	}
}

// startKamailio starts a real Kamailio on loopback with the kamailio.cfg
// the README shows (cmd/qualifyd/testdata/kamailio) and the dispatcher
// list file list, and returns a driver for its JSON-RPC.
func startKamailio(t testing.TB, list string) *Kamailio {
	t.Helper()
	cfg, _ := filepath.Abs("../../cmd/qualifyd/testdata/kamailio/kamailio.cfg")
	return &Kamailio{URL: peertest.StartKamailio(t, cfg, list).RPC, Timeout: 5 * time.Second}
}

// bigList writes a dispatcher list of n destinations, sip:10.x.y.z:5060,
// in sets of 100 (Kamailio loads one set in time quadratic in its size),
// and returns its path and the hosts.
func bigList(t testing.TB, n int) (string, []string) {
	t.Helper()
	var b strings.Builder
	hosts := make([]string, n)
	for i := range n {
		hosts[i] = fmt.Sprintf("10.%d.%d.%d:5060", i>>16, (i>>8)&255, i&255)
		fmt.Fprintf(&b, "%d sip:%s 0 0\n", i/100+1, hosts[i])
	}
	path := filepath.Join(t.TempDir(), "dispatcher.list")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, hosts
}

// TestKamailioReal100kDestinations runs the driver against a real
// Kamailio with the README's kamailio.cfg and 100,000 destinations: the
// 12 MB dispatcher.list reply is read whole, 2,000 hosts set inactive are
// read back inactive, and when the heartbeat expires the fail-open route
// makes all of them active again.
func TestKamailioReal100kDestinations(t *testing.T) {
	list, hosts := bigList(t, 100_000)
	k := startKamailio(t, list)
	k.Timeout, k.FailOpenAfter = 20*time.Second, time.Second
	level := mustResync(t, k)
	if len(k.dests) != len(hosts) {
		t.Fatalf("dispatcher.list read %d hosts, want %d", len(k.dests), len(hosts))
	}
	down := hosts[:0:0]
	for i := 0; i < len(hosts); i += 50 {
		down = append(down, hosts[i])
	}
	for _, h := range down {
		if err := k.push(t.Context(), Object{Key: host(h), Level: Down}); err != nil {
			t.Fatal(err)
		}
	}
	level = mustResync(t, k)
	if n := countLevel(level, hosts, Down); n != len(down) {
		t.Fatalf("%d hosts inactive after %d pushes", n, len(down))
	}
	if err := k.heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		read := time.Now()
		if countLevel(mustResync(t, k), hosts, Up) == len(hosts) {
			t.Logf("%d inactive of %d active again within %v after the heartbeat (expiry %v): the read that found them began %v after it",
				len(down), len(hosts), time.Since(start).Round(10*time.Millisecond), k.FailOpenAfter, read.Sub(start).Round(10*time.Millisecond))
			return
		}
		if time.Since(start) > failOpenBound {
			t.Fatalf("the heartbeat expired, but not every destination is active within %v", failOpenBound)
		}
	}
}

// failOpenBound bounds the wait for Kamailio's fail-open reload of
// 100,000 destinations, each read of the list 12 MB of JSON: it only
// stops a broken run (the figure is logged, Kamailio's speed is not
// qualifyd's to assert).
const failOpenBound = 90 * time.Second

// TestKamailioRealWriteQueueCut: without the README's tcp_conn_wq_max and
// tcp_wq_max lines, Kamailio cuts the 12 MB dispatcher.list reply of
// 100,000 destinations (its default write queue is 32 KiB; it logs
// "write queue full"), even on loopback, and the driver names the cause.
func TestKamailioRealWriteQueueCut(t *testing.T) {
	src, err := os.ReadFile("../../cmd/qualifyd/testdata/kamailio/kamailio.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(src)
	for _, line := range []string{"tcp_conn_wq_max=33554432\n", "tcp_wq_max=67108864\n"} {
		if !strings.Contains(cfg, "\n"+line) {
			t.Fatalf("kamailio.cfg has no line %q", line)
		}
		cfg = strings.Replace(cfg, "\n"+line, "\n", 1)
	}
	path := filepath.Join(t.TempDir(), "kamailio.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	list, _ := bigList(t, 100_000)
	pk := peertest.StartKamailio(t, path, list)
	k := &Kamailio{URL: pk.RPC, Timeout: 20 * time.Second}
	_, err = k.resync(t.Context())
	if err == nil || !strings.Contains(err.Error(), "dispatcher.list: reply truncated after ") ||
		!strings.HasSuffix(err.Error(), " bytes: raise tcp_conn_wq_max (and tcp_wq_max) in kamailio.cfg") {
		t.Fatalf("dispatcher.list with the default write queue: %v", err)
	}
	if !strings.Contains(pk.Log.String(), "write queue full") {
		t.Fatalf("the reply was cut, but Kamailio did not log a full write queue")
	}
	t.Log(err)
}

// countLevel counts the hosts at level l.
func countLevel(level func(Key) (Level, bool), hosts []string, l Level) int {
	n := 0
	for _, h := range hosts {
		if got, ok := level(host(h)); ok && got == l {
			n++
		}
	}
	return n
}
