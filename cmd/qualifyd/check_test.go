package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/responder"
)

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  string
		n    int
	}{
		{[]string{"-n", "3", "a", "b"}, "a b", 3},
		{[]string{"a", "-n", "4", "b"}, "a b", 4},
		{[]string{"a", "--", "-n"}, "a -n", 0},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("n", 0, "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil || strings.Join(pos, " ") != tc.pos || *n != tc.n {
			t.Errorf("%v: pos %q n %d err %v", tc.args, pos, *n, err)
		}
	}
}

func TestCheckCommand(t *testing.T) {
	r, err := responder.Listen("127.0.0.1:0", func(src netip.AddrPort) responder.Action { return responder.Action{Code: 503} })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	uri := "sip:peer@" + r.Addr().String()
	// localhost resolves from the hosts file, or to the loopback addresses
	// without it, never through DNS (docs/qualify-semantics.md §3.6).
	local := fmt.Sprintf("sip:peer@localhost:%d", r.Addr().Port())
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{uri, "--timeout", "1"}, 0, uri + ": Reachable via udp " + r.Addr().String() + ", status 503, RTT "},
		{[]string{local, "--timeout", "1"}, 0, local + ": Reachable via udp " + r.Addr().String() + ", status 503, RTT "},
		{[]string{"--2xx-only", uri}, 1, uri + ": Unreachable via udp " + r.Addr().String() + ", status 503\n"},
		{[]string{}, 2, ""},
		{[]string{"--transport", "sctp", uri}, 2, ""},
		{[]string{"http://x"}, 2, ""},
	} {
		var out, errb bytes.Buffer
		code := run(t.Context(), append([]string{"check"}, tc.args...), &out, &errb)
		if code != tc.code || !strings.HasPrefix(out.String(), tc.out) {
			t.Errorf("check %v: exit %d, out %q (stderr %q); want %d, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
}
