package sink

import (
	"os"
	"path/filepath"
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
func startKamailio(t *testing.T, list string) *Kamailio {
	t.Helper()
	cfg, _ := filepath.Abs("../../cmd/qualifyd/testdata/kamailio/kamailio.cfg")
	return &Kamailio{URL: peertest.StartKamailio(t, cfg, list).RPC, Timeout: 5 * time.Second}
}
