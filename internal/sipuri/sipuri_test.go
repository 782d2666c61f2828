package sipuri

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct{ uri, err string }{
		{"sip:a@127.0.0.1:5060", ""},
		{"sip:a@127.0.0.1", ""},
		{"<sip:a@127.0.0.1:5060;transport=tcp>", ""},
		{"sips:trunk.example.com", ""},
		{"sip:trunk.example.com.:5061;transport=TLS", ""},
		{"sip:a@[2001:db8::1]:5060", ""},
		{"sip:a:secret@host_1.example.net", ""},
		{"sip:a@127.0.0.1:99999", `URI "sip:a@127.0.0.1:99999": port "99999" is not a number in 1-65535`},
		{"sip:a@127.0.0.1:65536", `URI "sip:a@127.0.0.1:65536": port "65536" is not a number in 1-65535`},
		{"sip:a@127.0.0.1:0", `URI "sip:a@127.0.0.1:0": port "0" is not a number in 1-65535`},
		{"sip:a@127.0.0.1:+80", `URI "sip:a@127.0.0.1:+80": port "+80" is not a number in 1-65535`},
		{"sip:a@127.0.0.1:", `URI "sip:a@127.0.0.1:": empty port`},
		{"sip:a@[::1]:;transport=udp", `URI "sip:a@[::1]:;transport=udp": empty port`},
		{"sip:a@127.", `URI "sip:a@127.": host "127." is neither an IP address nor a host name`},
		{"sip:a@10.0.0", `URI "sip:a@10.0.0": host "10.0.0" is neither an IP address nor a host name`},
		{"sip:a@999.0.0.1", `URI "sip:a@999.0.0.1": host "999.0.0.1" is neither an IP address nor a host name`},
		{"sip:a@-bad-", `URI "sip:a@-bad-": host "-bad-" is neither an IP address nor a host name`},
		{"sip:a@ex..com", `URI "sip:a@ex..com": host "ex..com" is neither an IP address nor a host name`},
		{"sip:a@", `URI "sip:a@": no host`},
		{"sip:a@[::1", `URI "sip:a@[::1": IPV6 no closing bracket`},
		{"sip:a@[1.2.3.4]", `URI "sip:a@[1.2.3.4]": host "[1.2.3.4]" is not an IPv6 address`},
		{"sip:a@h;transport=ws", `URI "sip:a@h;transport=ws": transport "ws" is not one a probe is sent over (udp, tcp or tls)`},
		{"tel:+15551234", `URI "tel:+15551234": scheme "tel" is not sip or sips`},
	} {
		_, err := Parse(c.uri)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("Parse(%q) = %q, want %q", c.uri, got, c.err)
		}
		if cerr := Check(c.uri); (cerr == nil) != (err == nil) {
			t.Errorf("Check(%q) = %v, Parse: %v", c.uri, cerr, err)
		}
	}
}

// FuzzCheck holds that the fast path agrees with the parser.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"sip:a@127.0.0.1:5060", "sip:127.0.0.1", "sip:a@127.0.0.1:99999", "sip:a@b@1.2.3.4", "sip:a@1.2.3.4:05060"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, perr := Parse(s)
		if cerr := Check(s); (cerr == nil) != (perr == nil) {
			t.Fatalf("Check(%q) = %v, Parse: %v", s, cerr, perr)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	for _, uri := range []string{"sip:6001@192.0.2.1:5060", "sip:trunk.example.com;transport=tcp"} {
		b.Run(uri, func(b *testing.B) {
			for b.Loop() {
				if Check(uri) != nil {
					b.Fatal(uri)
				}
			}
		})
	}
}
