package sipprobe

import (
	"testing"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestParseRoute: transport from the URI parameter or sips scheme, then the
// endpoint's transport; destination the proxy when there is one.
func TestParseRoute(t *testing.T) {
	cases := []struct {
		uri, endpoint, proxy string
		want                 transport
		host, dest           string
	}{
		{"sip:a@192.0.2.7", "", "", udp, "192.0.2.7", "udp 192.0.2.7:5060"},
		{"sip:a@192.0.2.7:5070;transport=TCP", "udp", "", tcp, "192.0.2.7", "tcp 192.0.2.7:5070"},
		{"sip:a@192.0.2.7", "tcp", "", tcp, "192.0.2.7", "tcp 192.0.2.7:5060"},
		{"sip:a@192.0.2.7;transport=tls", "", "", tlsTransport, "192.0.2.7", "tls 192.0.2.7:5061"},
		{"sips:a@192.0.2.7", "udp", "", tlsTransport, "192.0.2.7", "tls 192.0.2.7:5061"},
		{"sip:a@[2001:db8::1]:5062", "", "", udp, "[2001:db8::1]", "udp [2001:db8::1]:5062"},
		{"sip:a@pbx.example", "", "", udp, "pbx.example", ""},
		{"<sip:a@pbx.example>", "", "sip:192.0.2.9;transport=tcp", tcp, "192.0.2.9", "tcp 192.0.2.9:5060"},
	}
	for _, tc := range cases {
		r, err := parseRoute(tc.uri, &probe.Options{Transport: tc.endpoint, OutboundProxy: tc.proxy})
		if err != nil {
			t.Errorf("%s: %v", tc.uri, err)
			continue
		}
		dest := qualify.Result{Transport: r.transport.String(), Dest: r.dest}.Addr()
		if r.transport != tc.want || r.host != tc.host || dest != tc.dest {
			t.Errorf("%s (%q, proxy %q): got %v %s %q, want %v %s %q", tc.uri, tc.endpoint, tc.proxy,
				r.transport, r.host, dest, tc.want, tc.host, tc.dest)
		}
	}
}
