package sink

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// TestKamailioRealDispatcher runs the driver against a real Kamailio,
// started on loopback with the kamailio.cfg the README shows
// (cmd/qualifyd/testdata/kamailio).
func TestKamailioRealDispatcher(t *testing.T) {
	dir, _ := filepath.Abs("../../cmd/qualifyd/testdata/kamailio")
	list := filepath.Join(dir, "dispatcher.list")
	sipPort, rpcPort := strconv.Itoa(peertest.FreePort(t, "udp")), strconv.Itoa(peertest.FreePort(t, "tcp"))
	run := t.TempDir()
	peertest.Start(t, "kamailio", "-DD", "-E", "-f", filepath.Join(dir, "kamailio.cfg"), "-w", run, "-Y", run,
		"-P", filepath.Join(run, "kamailio.pid"), "-A", "LISTEN=udp:127.0.0.1:"+sipPort, "-A", "HTTP_PORT="+rpcPort,
		"-A", fmt.Sprintf("DSLIST=%q", list), "-A", fmt.Sprintf("CTLSOCK=%q", "unix:"+filepath.Join(run, "kamailio.ctl")))
	k := &Kamailio{URL: "http://127.0.0.1:" + rpcPort + "/RPC", Timeout: 5 * time.Second}
	level := waitForRPC(t, k)
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

// waitForRPC reads dispatcher.list once Kamailio listens: it starts in
// well under a second; the 20 s bound only stops a broken start.
func waitForRPC(t *testing.T, k *Kamailio) func(Key) (Level, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		level, err := k.resync(ctx)
		if err == nil {
			return level
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kamailio did not answer: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
