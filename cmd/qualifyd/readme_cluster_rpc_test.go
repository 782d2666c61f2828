package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// TestREADMEKamailioClusterRPC: docs/routers.md's kamailio.cfg lines for a
// cluster are in testdata/kamailio/kamailio.cfg, and with them the real
// Kamailio answers the RPC from the nodes' addresses only: 127.0.0.1 and
// 127.0.0.3 (two nodes) get core.version, 127.0.0.2 (another host) a 403.
func TestREADMEKamailioClusterRPC(t *testing.T) {
	cfg, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "kamailio.cfg"))
	kam, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	excerptInFile(t, docText(t, "docs/routers.md"), "The lines for a cluster", "NODE_A", string(kam))
	dslist, _ := filepath.Abs(filepath.Join("testdata", "kamailio", "dispatcher.list"))
	k := peertest.StartKamailio(t, cfg, dslist, "RPC_ADDR=127.0.0.1", `NODE_A="127.0.0.1"`, `NODE_B="127.0.0.3"`, `NODE_C="127.0.0.4"`)
	for _, tc := range []struct {
		from string
		code int
		body string
	}{
		{"127.0.0.1", http.StatusOK, `"result"`},
		{"127.0.0.3", http.StatusOK, `"result"`},
		{"127.0.0.2", http.StatusForbidden, "not a qualifyd node"},
	} {
		code, body := rpcFrom(t, tc.from, k.RPC)
		t.Logf("core.version from %s: HTTP %d %s", tc.from, code, strings.TrimSpace(body))
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("core.version from %s: HTTP %d %q, want %d with %q", tc.from, code, body, tc.code, tc.body)
		}
	}
}

// rpcFrom posts core.version to url from the local address from.
func rpcFrom(t *testing.T, from, url string) (int, string) {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}, Timeout: peerBound}
	req, err := http.NewRequestWithContext(context.Background(), "POST", url, strings.NewReader(`{"jsonrpc":"2.0","method":"core.version","id":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("from %s: %v", from, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
