package sipprobe

import (
	"testing"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// TestFastRouteAgreesWithParser: every URI the fast path takes gives the
// destination, transport and Request-URI that sipgo's parser gives; the
// rest goes to the parser.
func TestFastRouteAgreesWithParser(t *testing.T) {
	o := &probe.Options{FromUser: "qd"}
	for _, tc := range []struct {
		uri  string
		fast bool
	}{
		{"sip:alice@192.0.2.1:5070", true},
		{"sip:192.0.2.1", true},
		{"sip:bob@[2001:db8::1]:5062", true},
		{"sip:[2001:db8::1]", true},
		{"sip:c1@127.0.0.1:0", false},
		{"sip:alice@192.0.2.1;transport=tcp", false},
		{"sips:alice@192.0.2.1", false},
		{"sip:alice@pbx.example.org", false},
		{"sip:alice@2001:db8::1", false},
		{"<sip:alice@192.0.2.1>", false},
		{"sip:alice@192.0.2.1?x=y", false},
	} {
		var rt route
		if got := fastRoute(tc.uri, o, &rt); got != tc.fast {
			t.Errorf("%s: fast %v, want %v", tc.uri, got, tc.fast)
			continue
		}
		if !tc.fast {
			continue
		}
		want, err := parseRoute(tc.uri, o)
		if err != nil {
			t.Fatalf("%s: %v", tc.uri, err)
		}
		if rt.dest != want.dest || rt.transport != want.transport || rt.ruri != want.ruri || rt.fromUser != want.fromUser {
			t.Errorf("%s: fast %+v, parser %+v", tc.uri, rt, *want)
		}
	}
	if fastRoute("sip:a@192.0.2.1", &probe.Options{OutboundProxy: "sip:proxy"}, &route{}) {
		t.Error("fast path with an outbound proxy")
	}
	if fastRoute("sip:a@192.0.2.1", &probe.Options{Transport: "tcp"}, &route{}) {
		t.Error("fast path over TCP")
	}
}
