package pjsip

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// parseFiles parses src as pjsip.conf with files as the other files of the
// configuration directory.
func parseFiles(src string, files map[string]string) (*Config, error) {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return Parse("pjsip.conf", []byte(src), Options{FS: fsys})
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		is   error
		want string
	}{
		{"no closing bracket", "[pbx07\ntype=aor", ErrSyntax,
			`pjsip.conf:1: syntax error: no closing ']' in "[pbx07"`},
		{"no closing paren", "[pbx07](!", ErrSyntax,
			`pjsip.conf:1: section "pbx07": syntax error: no closing ')' in "[pbx07](!"`},
		{"option outside section", "type=aor", ErrSyntax,
			`pjsip.conf:1: syntax error: option "type=aor" outside any section`},
		{"no equals", "[a]\ntype=aor\nqualify_frequency", ErrSyntax,
			`pjsip.conf:3: section "a": syntax error: no '=' in "qualify_frequency"`},
		{"no name", "[a]\n = 3", ErrSyntax,
			`pjsip.conf:2: section "a": syntax error: no option name in "= 3"`},
		{"invalid escape", "[a]\n\\ x=1", ErrSyntax,
			`pjsip.conf:2: section "a": syntax error: invalid escape in "\\ x=1"`},
		{"unclosed block comment", "[a]\ntype=aor ;-- starts\n\n", ErrSyntax,
			`pjsip.conf:2: syntax error: block comment ";--" is never closed with "--;"`},
		{"stray block end", "[a]\ntype=aor --;", ErrSyntax,
			`pjsip.conf:2: syntax error: "--;" closes no block comment`},
		{"empty inheritance", "[x](!)\n[a](x,)", ErrSyntax,
			`pjsip.conf:2: section "a": syntax error: empty name in the section's options`},
		{"missing template", "[a](!)\n[b](tpl)\ntype=aor", ErrNoSection,
			`pjsip.conf:2: section "b": no such section: inherits from "tpl", which is not defined before`},
		{"template defined later", "[b](tpl)\n[tpl](!)", ErrNoSection,
			`pjsip.conf:1: section "b": no such section: inherits from "tpl", which is not defined before`},
		{"append to missing", "[a]\ntype=aor\n[b](+)\nx=1", ErrNoSection,
			`pjsip.conf:3: section "b": no such section: append (+) to a section not defined before`},
		{"append to template", "[a](!)\ntype=aor\n[a](+)\nx=1", ErrNoSection,
			`pjsip.conf:3: section "a": no such section: append (+) to a section not defined before`},
		{"filtered append matches nothing", "[pbx07]\ntype=endpoint\n[pbx07](+type=aor)\nqualify_failures=3", ErrNoSection,
			`pjsip.conf:3: section "pbx07": no such section: append (+type=aor) matches no section defined before`},
		{"bad filter", "[a]\ntype=aor\n[a](+type=a[)", ErrSyntax,
			`pjsip.conf:3: section "a": syntax error: filter "type=a[": error parsing regexp: missing closing ]: ` + "`[`"},
		{"unknown aor option", "[pbx07]\ntype=aor\nqualify_falures=3", ErrUnknownOption,
			`pjsip.conf:3: section "pbx07": option "qualify_falures": unknown option: Asterisk defines no AoR option "qualify_falures"`},
		{"frequency too big", "[a]\ntype=aor\nqualify_frequency=86401", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_frequency": invalid value: "86401" is out of range: must be between 0 and 86400`},
		{"frequency fractional", "[a]\ntype=aor\nqualify_frequency=1.5", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_frequency": invalid value: "1.5" is not an unsigned integer`},
		{"frequency negative", "[a]\ntype=aor\nqualify_frequency=-1", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_frequency": invalid value: "-1" is not an unsigned integer`},
		{"frequency empty", "[a]\ntype=aor\nqualify_frequency=", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_frequency": invalid value: "" is not an unsigned integer`},
		{"frequency bad octal", "[a]\ntype=aor\nqualify_frequency=08", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_frequency": invalid value: "08" is not an unsigned integer`},
		{"timeout not a number", "[a]\ntype=aor\nqualify_timeout=3s", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_timeout": invalid value: "3s" is not a number of seconds`},
		{"timeout too big", "[a]\ntype=aor\nqualify_timeout=86400.5", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_timeout": invalid value: "86400.5" is out of range: must be at most 86400 seconds`},
		{"timeout nan", "[a]\ntype=aor\nqualify_timeout=nan", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_timeout": invalid value: "nan" is not a number of seconds`},
		{"failures zero", "[a]\ntype=aor\nqualify_failures=0", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_failures": invalid value: "0" is out of range: must be at least 1`},
		{"successes word", "[a]\ntype=aor\nqualify_successes=two", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_successes": invalid value: "two" is not an unsigned integer`},
		{"retry negative", "[a]\ntype=aor\nqualify_retry_interval=-0.5", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_retry_interval": invalid value: "-0.5" is out of range: must be between 0 and 86400 seconds`},
		{"down too big", "[a]\ntype=aor\nqualify_down_interval=1e6", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_down_interval": invalid value: "1e6" is out of range: must be between 0 and 86400 seconds`},
		{"failures neither number nor auto", "[a]\ntype=aor\nqualify_failures=automatic", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_failures": invalid value: "automatic" is not an unsigned integer`},
		{"failures min zero", "[a]\ntype=aor\nqualify_failures_min=0", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_failures_min": invalid value: "0" is out of range: must be between 1 and 255`},
		{"failures max too big", "[a]\ntype=aor\nqualify_failures_max=256", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_failures_max": invalid value: "256" is out of range: must be between 1 and 255`},
		{"failures min above max", "[a]\ntype=aor\nqualify_failures=auto\nqualify_failures_min=5\nqualify_failures_max=4", ErrValue,
			`pjsip.conf:1: section "a": invalid value: invalid qualify policy: qualify_failures_min must be at most qualify_failures_max (4), got 5`},
		{"false outages zero", "[a]\ntype=aor\nqualify_false_outages_per_day=0", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_false_outages_per_day": invalid value: "0" is not a number of false outages a day: must be more than 0 and at most 86400`},
		{"false outages word", "[a]\ntype=aor\nqualify_false_outages_per_day=few", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_false_outages_per_day": invalid value: "few" is not a number of false outages a day: must be more than 0 and at most 86400`},
		{"window negative", "[a]\ntype=aor\nqualify_failure_window=-5", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_failure_window": invalid value: "-5" is out of range: must be between 0 and 86400 seconds`},
		{"success codes provisional", "[a]\ntype=aor\nqualify_success_codes=180,200-299", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_success_codes": invalid value: invalid status code list: 180 is not a final response code (200 to 699)`},
		{"call failure codes provisional", "[a]\ntype=aor\nqualify_call_failure_codes=100", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_call_failure_codes": invalid value: invalid status code list: 100 is not a final response code (200 to 699)`},
		{"drain max zero", "[a]\ntype=aor\nqualify_drain_max=0", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_drain_max": invalid value: "0" is out of range: must be between 1 and 86400`},
		{"quiet only not a boolean", "[a]\ntype=aor\nqualify_quiet_only=maybe", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_quiet_only": invalid value: "maybe" is not a boolean (yes or no)`},
		{"success codes empty range", "[a]\ntype=aor\nqualify_success_codes=299-200", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_success_codes": invalid value: invalid status code list: range "299-200" is empty`},
		{"success codes after 2xx only", "[a]\ntype=aor\nqualify_2xx_only=yes\nqualify_success_codes=200-299,404", ErrValue,
			`pjsip.conf:4: section "a": option "qualify_success_codes": invalid value: qualify_success_codes and qualify_2xx_only=yes are exclusive`},
		{"2xx only after success codes", "[t](!)\nqualify_success_codes=200-299,404\n[a](t)\ntype=aor\nqualify_2xx_only=yes", ErrValue,
			`pjsip.conf:5: section "a": option "qualify_2xx_only": invalid value: qualify_2xx_only=yes and qualify_success_codes are exclusive`},
		{"bad boolean", "[a]\ntype=aor\nqualify_2xx_only=maybe", ErrValue,
			`pjsip.conf:3: section "a": option "qualify_2xx_only": invalid value: "maybe" is not a boolean (yes or no)`},
		{"bad Asterisk boolean", "[a]\ntype=aor\nremove_existing=", ErrValue,
			`pjsip.conf:3: section "a": option "remove_existing": invalid value: "" is not a boolean (yes or no)`},
		{"bad Asterisk integer", "[a]\ntype=aor\nmax_contacts=one", ErrValue,
			`pjsip.conf:3: section "a": option "max_contacts": invalid value: "one" is not an unsigned integer`},
		{"contact not sip", "[a]\ntype=aor\ncontact=sip:ok@192.0.2.1,http://192.0.2.1", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "http://192.0.2.1" is not a sip: or sips: URI`},
		{"contact without host", "[a]\ntype=aor\ncontact=sip:alice@", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:alice@" has no valid host`},
		{"contact port too big", "[a]\ntype=aor\ncontact=sip:a@127.0.0.1:99999", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@127.0.0.1:99999" cannot be probed: port "99999" is not a number in 1-65535`},
		{"contact port 65536", "[a]\ntype=aor\ncontact=sip:a@127.0.0.1:65536", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@127.0.0.1:65536" cannot be probed: port "65536" is not a number in 1-65535`},
		{"contact empty port", "[a]\ntype=aor\ncontact=sip:a@127.0.0.1:", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@127.0.0.1:" cannot be probed: empty port`},
		{"contact cut address", "[a]\ntype=aor\ncontact=sip:a@127.", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@127." cannot be probed: host "127." is neither an IP address nor a host name`},
		{"contact bad host name", "[a]\ntype=aor\ncontact=sip:a@-bad-", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@-bad-" cannot be probed: host "-bad-" is neither an IP address nor a host name`},
		{"contact cut IPv6", "[a]\ntype=aor\ncontact=sip:a@[2001:db8::1", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@[2001:db8::1" has no valid host`},
		{"contact websocket", "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\\;transport=ws", ErrValue,
			`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@192.0.2.1;transport=ws" cannot be probed: transport "ws" is not one a probe is sent over (udp, tcp or tls)`},
		{"wizard remote host with bad port", "[w]\ntype=wizard\nremote_hosts=192.0.2.9:5060,192.0.2.10:0", ErrValue,
			`pjsip.conf:3: section "w": option "remote_hosts": invalid value: contact "sip:192.0.2.10:0" cannot be probed: port "0" is not a number in 1-65535`},
		{"aor outbound proxy bad port", "[a]\ntype=aor\noutbound_proxy=sip:edge.example:0", ErrValue,
			`pjsip.conf:3: section "a": option "outbound_proxy": invalid value: outbound proxy "sip:edge.example:0" cannot be used: port "0" is not a number in 1-65535`},
		{"endpoint outbound proxy cut", "[a]\ntype=aor\n[e]\ntype=endpoint\naors=a\noutbound_proxy=sip:10.0.0", ErrValue,
			`pjsip.conf:6: section "e": option "outbound_proxy": invalid value: outbound proxy "sip:10.0.0" cannot be used: host "10.0.0" is neither an IP address nor a host name`},
		{"inherited bad value names its line", "[t](!)\nqualify_frequency=abc\n[a](t)\ntype=aor", ErrValue,
			`pjsip.conf:2: section "a": option "qualify_frequency": invalid value: "abc" is not an unsigned integer`},
		{"duplicate aor", "[a]\ntype=aor\n[a]\ntype=aor", ErrDuplicate,
			`pjsip.conf:3: section "a": duplicate section: a second aor named "a" (the first is at pjsip.conf:1)`},
		{"missing include", "#include nope.conf", ErrInclude,
			`pjsip.conf:1: include error: #include "nope.conf": no such file (resolved to nope.conf)`},
		{"glob matches nothing", `#include "pjsip.d/*.conf"`, ErrInclude,
			`pjsip.conf:1: include error: #include "pjsip.d/*.conf": no such file (resolved to pjsip.d/*.conf)`},
		{"include without file", "#include", ErrSyntax,
			`pjsip.conf:1: syntax error: #include needs a file name`},
		{"exec", "#exec /usr/bin/make-config", ErrInclude,
			`pjsip.conf:1: include error: #exec "/usr/bin/make-config": refused, qualifyd never runs programs from its configuration`},
		{"unknown directive", "#inclde x.conf", ErrSyntax,
			`pjsip.conf:1: syntax error: #inclde is not a directive (want #include or #tryinclude)`},
		{"error in included file", "[a]\n#include a.conf", ErrUnknownOption,
			`a.conf:2: section "a": option "qualify_frequncy": unknown option: Asterisk defines no AoR option "qualify_frequncy"`},
		{"duplicate endpoint", "[e]\ntype=endpoint\n[x]\ntype=aor\n[e]\ntype=endpoint", ErrDuplicate,
			`pjsip.conf:5: section "e": duplicate section: a second endpoint named "e" (the first is at pjsip.conf:1)`},
		{"wizard clashes with endpoint", "[w]\ntype=endpoint\n[w]\ntype=wizard", ErrDuplicate,
			`pjsip.conf:3: section "w": duplicate section: a second endpoint named "w" (the first is at pjsip.conf:1)`},
		{"duplicate wizard", "[w]\ntype=wizard\n[w]\ntype=wizard", ErrDuplicate,
			`pjsip.conf:3: section "w": duplicate section: a second wizard named "w" (the first is at pjsip.conf:1)`},
		{"bad protocol", "[t]\ntype=transport\nprotocol=sctp", ErrValue,
			`pjsip.conf:3: section "t": option "protocol": invalid value: "sctp" is not a transport protocol (udp, tcp, tls, ws, wss or flow)`},
		{"bad max initial qualify time", "[global]\ntype=global\nmax_initial_qualify_time=1.5", ErrValue,
			`pjsip.conf:3: section "global": option "max_initial_qualify_time": invalid value: "1.5" is not an unsigned integer`},
		{"panic threshold zero", "[global]\ntype=global\npanic_threshold=0", ErrValue,
			`pjsip.conf:3: section "global": option "panic_threshold": invalid value: "0" is out of range: must be between 1 and 100`},
		{"panic threshold over 100", "[global]\ntype=global\npanic_threshold=101", ErrValue,
			`pjsip.conf:3: section "global": option "panic_threshold": invalid value: "101" is out of range: must be between 1 and 100`},
		{"panic hold threshold zero", "[global]\ntype=global\npanic_hold_threshold=0", ErrValue,
			`pjsip.conf:3: section "global": option "panic_hold_threshold": invalid value: "0" is out of range: must be between 1 and 100`},
		{"panic min destinations zero", "[global]\ntype=global\npanic_min_destinations=0", ErrValue,
			`pjsip.conf:3: section "global": option "panic_min_destinations": invalid value: "0" is out of range: must be at least 1`},
		{"wizard unknown aor option", "[w]\ntype=wizard\nremote_hosts=192.0.2.9\naor/qualify_fail=3", ErrUnknownOption,
			`pjsip.conf:4: section "w": option "aor/qualify_fail": unknown option: Asterisk defines no AoR option "qualify_fail"`},
		{"wizard bad aor value", "[w]\ntype=wizard\naor/qualify_failures=0", ErrValue,
			`pjsip.conf:3: section "w": option "aor/qualify_failures": invalid value: "0" is out of range: must be at least 1`},
		{"wizard sends_auth without username", "[w]\ntype=wizard\nsends_auth=yes\noutbound_auth/password=x", ErrValue,
			`pjsip.conf:3: section "w": option "sends_auth": invalid value: sends_auth=yes needs outbound_auth/username`},
		{"wizard bad sends_auth", "[w]\ntype=wizard\nsends_auth=sometimes", ErrValue,
			`pjsip.conf:3: section "w": option "sends_auth": invalid value: "sometimes" is not a boolean (yes or no)`},
		{"wizard other variable", "[w]\ntype=wizard\nremote_hosts=h\ncontact_pattern=sip:${USER}@${REMOTE_HOST}", ErrValue,
			`pjsip.conf:4: section "w": option "contact_pattern": invalid value: "sip:${USER}@${REMOTE_HOST}": only ${REMOTE_HOST} can be substituted`},
		{"wizard bad remote host", "[w]\ntype=wizard\nremote_hosts=192.0.2.9,\"bad host\"", ErrValue,
			`pjsip.conf:3: section "w": option "remote_hosts": invalid value: contact "sip:\"bad host\"" has no valid host`},
		{"wizard clashes with aor", "[w]\ntype=aor\n[w]\ntype=wizard", ErrDuplicate,
			`pjsip.conf:3: section "w": duplicate section: a second aor named "w" (the first is at pjsip.conf:1)`},
	}
	files := map[string]string{"a.conf": "type=aor\nqualify_frequncy=30\n"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFiles(tt.src, files)
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

// TestWarnings checks what Asterisk logs and carries on from: each input
// loads, with exactly these warnings.
func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"none", "[a]\ntype=aor\ncontact=sip:a@192.0.2.1", nil},
		{"missing transport", "[a]\ntype=aor\n[a]\ntype=endpoint\naors=a\ntransport=udp", []string{
			`pjsip.conf:6: section "a": option "transport": missing reference: no transport section "udp": probes go by the contact URI alone, as Asterisk sends them (it logs "Unable to retrieve PJSIP transport 'udp'")`}},
		{"missing outbound auth", "[a]\ntype=aor\n[e]\ntype=endpoint\naors=a\noutbound_auth=a-auth,b", []string{
			`pjsip.conf:6: section "e": option "outbound_auth": missing reference: no auth section "a-auth": a challenge is not answered, as Asterisk does (it logs "Couldn't find auth 'a-auth'. Cannot authenticate")`}},
		{"one warning per endpoint", "[a]\ntype=aor\n[b]\ntype=aor\n[e]\ntype=endpoint\naors=a,b\ntransport=t", []string{
			`pjsip.conf:8: section "e": option "transport": missing reference: no transport section "t": probes go by the contact URI alone, as Asterisk sends them (it logs "Unable to retrieve PJSIP transport 't'")`}},
		{"both missing", "[a]\ntype=aor\n[e]\ntype=endpoint\naors=a\ntransport=t\noutbound_auth=x", []string{
			`pjsip.conf:6: section "e": option "transport": missing reference: no transport section "t": probes go by the contact URI alone, as Asterisk sends them (it logs "Unable to retrieve PJSIP transport 't'")`,
			`pjsip.conf:7: section "e": option "outbound_auth": missing reference: no auth section "x": a challenge is not answered, as Asterisk does (it logs "Couldn't find auth 'x'. Cannot authenticate")`}},
		{"endpoint without aors is not looked up", "[e]\ntype=endpoint\ntransport=t", nil},
		{"duplicate acl, once per type", "[acl]\ntype=acl\n[acl]\ntype=acl\n[acl]\ntype=acl\n[i]\ntype=identify\n[i]\ntype=identify", []string{
			`pjsip.conf:3: section "acl": duplicate section: a second acl named "acl" (the first is at pjsip.conf:1); Asterisk loads no acl of this configuration`,
			`pjsip.conf:9: section "i": duplicate section: a second identify named "i" (the first is at pjsip.conf:7); Asterisk loads no identify of this configuration`}},
		{"duplicate transport drops every transport", "[t]\ntype=transport\n[u]\ntype=transport\n[t]\ntype=transport\n[a]\ntype=aor\n[a]\ntype=endpoint\naors=a\ntransport=u", []string{
			`pjsip.conf:5: section "t": duplicate section: a second transport named "t" (the first is at pjsip.conf:1); Asterisk loads no transport of this configuration`,
			`pjsip.conf:12: section "a": option "transport": missing reference: no transport section "u": probes go by the contact URI alone, as Asterisk sends them (it logs "Unable to retrieve PJSIP transport 'u'")`}},
		{"duplicate auth drops every auth, not a wizard's", "[x]\ntype=auth\n[x]\ntype=auth\n[w]\ntype=wizard\nsends_auth=yes\noutbound_auth/username=w", []string{
			`pjsip.conf:3: section "x": duplicate section: a second auth named "x" (the first is at pjsip.conf:1); Asterisk loads no auth of this configuration`}},
		{"template and section of one name", "[acl](!)\ntype=acl\n[acl](acl)", nil},
		{"same name, other types", "[n]\ntype=acl\n[n]\ntype=identify\n[n]\ntype=aor", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFiles(tt.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range cfg.Warnings {
				got = append(got, w.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings\n got: %q\nwant: %q", got, tt.want)
			}
		})
	}
}

func TestIncludeLoop(t *testing.T) {
	files := map[string]string{
		"b.conf": "[b]\n#include c.conf\n",
		"c.conf": "\n#include \"pjsip.conf\"\n",
	}
	fsys := fstest.MapFS{"pjsip.conf": &fstest.MapFile{Data: []byte("#include <b.conf>\n")}}
	for name, body := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	_, err := Load("pjsip.conf", Options{FS: fsys})
	want := `c.conf:2: include loop: #include "pjsip.conf": pjsip.conf -> b.conf -> c.conf -> pjsip.conf`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got: %v\nwant: %s", err, want)
	}
	if !errors.Is(err, ErrIncludeLoop) {
		t.Errorf("%v is not ErrIncludeLoop", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("/nonexistent/pjsip.conf", Options{FS: fstest.MapFS{}})
	if !errors.Is(err, ErrInclude) {
		t.Fatalf("Load of a missing file: %v, want ErrInclude", err)
	}
}

// TestUnresolvedNote: the probes of an AoR whose endpoint names an
// undefined transport and auth go without them, with both noted.
func TestUnresolvedNote(t *testing.T) {
	cfg, err := parseFiles("[a]\ntype=aor\ncontact=sip:a@192.0.2.1\n[e]\ntype=endpoint\naors=a\ntransport=t\noutbound_auth=x", nil)
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.AoRs[0].OptionsValue()
	want := `transport "t" is not defined: sent by the contact URI alone, as Asterisk does; auth "x" is not defined: a challenge is not answered, as Asterisk does`
	if o.Transport != "" || o.Auth != (probe.Credentials{}) || o.Unresolved != want {
		t.Fatalf("options %+v, want no transport, no auth, note %q", o, want)
	}
}

// TestDetectionOptions reads the options of detection that fits the link (qualify-semantics
// §2) into the AoR's policy; a number after auto turns auto off again.
func TestDetectionOptions(t *testing.T) {
	src := "[t](!)\nqualify_failures=auto\n[a](t)\ntype=aor\nqualify_frequency=30\nqualify_failures_min=2\n" +
		"qualify_failures_max=6\nqualify_false_outages_per_day=0.1\nqualify_failure_window=20.5\nqualify_success_codes=404,200-299,405\n" +
		"[b](t)\ntype=aor\nqualify_failures=4\nqualify_2xx_only=no\n"
	cfg, err := parseFiles(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.AoRs[0].PolicyValue(), cfg.AoRs[1].PolicyValue()
	want := qualify.Report{Frequency: 30, Timeout: 3, Failures: 3, RetryInterval: 30, DownInterval: 30, Successes: 1,
		FailuresAuto: true, FailuresMin: 2, FailuresMax: 6, FalseOutagesPerDay: 0.1, FailureWindow: 20.5, SuccessCodes: "200-299,404-405"}
	if got := a.Report(); got != want {
		t.Errorf("a: got %+v\nwant %+v", got, want)
	}
	if b.FailuresAuto || b.Failures != 4 || !b.SuccessCodes.Empty() {
		t.Errorf("b: %+v, want fixed N = 4 and no success codes", b)
	}
}

// TestEverySectionsError: a section's error does not stop the others
// being read; the configuration is refused with each of them in file
// order, after a duplicate AoR named before the first, and at most
// MaxErrors of them.
func TestEverySectionsError(t *testing.T) {
	src := "[a]\ntype=aor\ncontact=sip:a@127.0.0.1:99999\n" +
		"[b]\ntype=aor\n[b]\ntype=aor\n" +
		"[c]\ntype=endpoint\naors=c\n[c]\ntype=endpoint\n" +
		"[d]\ntype=aor\nqualify_frequency=x\n"
	_, err := parseFiles(src, nil)
	want := []string{
		`pjsip.conf:6: section "b": duplicate section: a second aor named "b" (the first is at pjsip.conf:4)`,
		`pjsip.conf:3: section "a": option "contact": invalid value: contact "sip:a@127.0.0.1:99999" cannot be probed: port "99999" is not a number in 1-65535`,
		`pjsip.conf:11: section "c": duplicate section: a second endpoint named "c" (the first is at pjsip.conf:8)`,
		`pjsip.conf:15: section "d": option "qualify_frequency": invalid value: "x" is not an unsigned integer`,
	}
	var got []string
	for _, e := range Errors(err) {
		got = append(got, e.Error())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("errors\n got %q\nwant %q", got, want)
	}
	if !errors.Is(err, ErrValue) || !errors.Is(err, ErrDuplicate) {
		t.Errorf("%v does not wrap ErrValue and ErrDuplicate", err)
	}
	if b := Brief(err); b != want[0]+" (and 3 more errors; qualifyd check-config lists them)" {
		t.Errorf("Brief = %q", b)
	}

	var many strings.Builder
	for i := range MaxErrors + 5 {
		fmt.Fprintf(&many, "[s%d]\ntype=aor\nqualify_frequency=x\n", i)
	}
	_, err = parseFiles(many.String(), nil)
	if errs := Errors(err); len(errs) != MaxErrors || !strings.Contains(errs[MaxErrors-1].Error(), fmt.Sprintf(`section "s%d"`, MaxErrors-1)) {
		t.Fatalf("%d errors, the last %v; want the first %d", len(errs), errs[len(errs)-1], MaxErrors)
	}
}
