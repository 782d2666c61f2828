package pjsip

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// aorLines returns the dump of the AoRs only, without the global line and
// endpoints, for the behaviour tables.
func aorLines(cfg *Config) string {
	var keep []string
	for _, l := range strings.SplitAfter(dump(cfg), "\n") {
		if !strings.HasPrefix(l, "max_initial") && !strings.HasPrefix(l, "endpoint ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// noProbe is the probe line of an AoR that no endpoint lists.
const noProbe = `  probe proxy="" transport="" from=""@"" auth="":""@""` + "\n"

// defaults are the policy and probe lines of an AoR with no options.
const defaults = "  policy F=0s T=3s N=1 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe

func TestParse(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"defaults are Asterisk's", "[a]\ntype=aor",
			"aor a pjsip.conf:1\n" + defaults},
		{"qualifyd options", "[a]\ntype=aor\nqualify_frequency=30\nqualify_timeout=2.5\nqualify_failures=3\n" +
			"qualify_retry_interval=0.25\nqualify_down_interval=10\nqualify_successes=2\nqualify_2xx_only=on\nqualify_latency_only=Y",
			"aor a pjsip.conf:1\n  policy F=30s T=2.5s N=3 R=250ms D=10s M=2 2xx=true latency=true\n" + noProbe},
		{"integers as strtoul base 0", "[a]\ntype=aor\nqualify_frequency=0x1e\nqualify_failures=010\nqualify_successes=+2",
			"aor a pjsip.conf:1\n  policy F=30s T=3s N=8 R=0s D=0s M=2 2xx=false latency=false\n" + noProbe},
		{"timeout zero or less is the transaction timeout", "[a]\ntype=aor\nqualify_timeout=-1",
			"aor a pjsip.conf:1\n  policy F=0s T=0s N=1 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe},
		{"last single value wins, contacts accumulate", "[a]\ntype=aor\nqualify_frequency=10\ncontact=sip:a@192.0.2.1\n" +
			"qualify_frequency=20\ncontact=sip:b@192.0.2.2, sip:a@192.0.2.1 ,\ncontact=",
			"aor a pjsip.conf:1\n  contact sip:a@192.0.2.1\n  contact sip:b@192.0.2.2\n" +
				"  policy F=20s T=3s N=1 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe},
		{"escaped semicolon and => ", "[a]\ntype=aor\ncontact => sip:a@192.0.2.1\\;transport=tcp ; comment",
			"aor a pjsip.conf:1\n  contact sip:a@192.0.2.1;transport=tcp\n" + defaults},
		{"block comments nest, span lines and join text", "[a]\ntype=aor\nqualify_;-- one ;-- two --; still --;frequency=30\n" +
			";--\nqualify_failures=9\n--;\nqualify_successes=2 ;--- a line comment, not a block\n",
			"aor a pjsip.conf:1\n  policy F=30s T=3s N=1 R=0s D=0s M=2 2xx=false latency=false\n" + noProbe},
		{"+= appends to the last value", "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\ncontact += ,sip:b@192.0.2.2\nmailboxes+=x",
			"aor a pjsip.conf:1\n  contact sip:a@192.0.2.1\n  contact sip:b@192.0.2.2\n" + defaults},
		{"templates: inherited first, own values win", "[t](!)\ntype=aor\nqualify_frequency=60\nqualify_failures=2\n" +
			"[a](t)\nqualify_frequency=30",
			"aor a pjsip.conf:5\n  policy F=30s T=3s N=2 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe},
		{"inheritance is a snapshot", "[t](!)\ntype=aor\n[a](t)\n[t](+TEMPLATES=include)\nqualify_frequency=60",
			"aor a pjsip.conf:3\n" + defaults},
		{"a section without type is a template in all but name", "[common]\nqualify_failures=4\n[a](common)\ntype=aor",
			"aor a pjsip.conf:3\n  policy F=0s T=3s N=4 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe},
		{"the first type= decides", "[t](!)\ntype=endpoint\n[a](t)\ntype=aor\n[b]\ntype=aor",
			"aor b pjsip.conf:5\n" + defaults},
		{"(+) appends to the first section of the name", "[pbx07]\ntype=endpoint\n[pbx07]\ntype=aor\n[pbx07](+)\nqualify_failures=3",
			"aor pbx07 pjsip.conf:3\n" + defaults},
		{"(+type=aor) appends to the AoR, case-insensitively", "[pbx07]\ntype=endpoint\n[PBX07]\ntype=aor\n[pbx07](+type=aor)\nqualify_failures=3",
			"aor PBX07 pjsip.conf:3\n  policy F=0s T=3s N=3 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe},
		{"filters are regular expressions joined by &", "[x]\ntype=aor\nmailboxes=1\n[x](+type=^ao&mailboxes=1)\nqualify_failures=3",
			"aor x pjsip.conf:1\n  policy F=0s T=3s N=3 R=0s D=0s M=1 2xx=false latency=false\n" + noProbe},
		{"after an append, inheritance adds to the earlier section", "[t](!)\nqualify_successes=5\n[a]\ntype=aor\n[a](+,t)",
			"aor a pjsip.conf:3\n  policy F=0s T=3s N=1 R=0s D=0s M=5 2xx=false latency=false\n" + noProbe},
		{"a section inheriting from itself doubles", "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\n[a](+,a)",
			"aor a pjsip.conf:1\n  contact sip:a@192.0.2.1\n" + defaults},
		{"other types are ignored", "[i]\ntype=identify\nmatch=192.0.2.1\nbogus=1\n[r]\ntype=registration\n[s]\ntype=system\n[p]\ntype=phoneprov",
			""},
		{"endpoint: first in file order, its transport, auth and From", "[t1]\ntype=transport\nprotocol=TLS\n[t2]\ntype=transport\n" +
			"[auth1]\ntype=auth\nusername=u\npassword=p\nrealm=r\nnonce_lifetime=32\n" +
			"[e1]\ntype=endpoint\naors=x,a\ntransport=t1\noutbound_auth=auth1\nfrom_user=fu\nfrom_domain=fd\noutbound_proxy=sip:ep@192.0.2.9\nallow=ulaw\n" +
			"[e2]\ntype=endpoint\naors=a\ntransport=t2\n[a]\ntype=aor",
			"aor a pjsip.conf:25\n  policy F=0s T=3s N=1 R=0s D=0s M=1 2xx=false latency=false\n" +
				`  probe proxy="sip:ep@192.0.2.9" transport="tls" from="fu"@"fd" auth="u":"p"@"r"` + "\n" +
				`  tls t1 ca="" capath="" verify=false wildcard=false cert="" key="" method="" versions=0x301-0x301 client=false` + "\n"},
		{"the AoR's outbound_proxy wins; unset protocol is udp", "[t]\ntype=transport\n[e]\ntype=endpoint\naors=a\ntransport=t\n" +
			"outbound_proxy=sip:ep@192.0.2.9\n[a]\ntype=aor\noutbound_proxy=sip:aor@192.0.2.8",
			"aor a pjsip.conf:8\n  policy F=0s T=3s N=1 R=0s D=0s M=1 2xx=false latency=false\n" +
				`  probe proxy="sip:aor@192.0.2.8" transport="udp" from=""@"" auth="":""@""` + "\n"},
		{"AoRs sorted by name", "[b]\ntype=aor\n[a]\ntype=aor",
			"aor a pjsip.conf:3\n" + defaults + "aor b pjsip.conf:1\n" + defaults},
		{"wizard: contacts from remote_hosts, aor/ options, auth", "[w]\ntype=wizard\ntransport=t\nremote_hosts=192.0.2.1:5061, sip.example.com\n" +
			"sends_auth=yes\noutbound_auth/username=wu\noutbound_auth/password=wp\naor/qualify_frequency=15\naor/qualify_failures=2\n" +
			"endpoint/from_user=wf\nendpoint/allow=ulaw\ninbound_auth/username=x\n[t]\ntype=transport\nprotocol=tcp",
			"aor w pjsip.conf:1\n  contact sip:192.0.2.1:5061\n  contact sip:sip.example.com\n" +
				"  policy F=15s T=3s N=2 R=0s D=0s M=1 2xx=false latency=false\n" +
				`  probe proxy="" transport="tcp" from="wf"@"" auth="wu":"wp"@""` + "\n"},
		{"wizard: contact_pattern, outbound_proxy", "[w]\ntype=wizard\nremote_hosts=192.0.2.1\ncontact_pattern=sips:trunk@${REMOTE_HOST}\\;transport=tls\noutbound_proxy=sip:p@192.0.2.3",
			"aor w pjsip.conf:1\n  contact sips:trunk@192.0.2.1;transport=tls\n  policy F=0s T=3s N=1 R=0s D=0s M=1 2xx=false latency=false\n" +
				`  probe proxy="sip:p@192.0.2.3" transport="" from=""@"" auth="":""@""` + "\n"},
		{"wizard: aor/contact replaces remote_hosts", "[w]\ntype=wizard\nremote_hosts=192.0.2.1\naor/contact=sip:x@192.0.2.2",
			"aor w pjsip.conf:1\n  contact sip:x@192.0.2.2\n" + defaults},
		{"wizard templates and appends", "[wt](!)\ntype=wizard\nremote_hosts=192.0.2.1\naor/qualify_frequency=60\n[w](wt)\naor/qualify_frequency=30\n" +
			"[w](+type=wizard)\naor/qualify_retry_interval=1.5",
			"aor w pjsip.conf:5\n  contact sip:192.0.2.1\n  policy F=30s T=3s N=1 R=1.5s D=0s M=1 2xx=false latency=false\n" + noProbe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFiles(tt.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := aorLines(cfg); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// aorFile returns a pjsip.conf of n AoRs, each with one contact and a
// qualify_frequency, as /tmp/big.conf of the README's million-AoR figures.
func aorFile(n int) []byte {
	var src bytes.Buffer
	for i := range n {
		fmt.Fprintf(&src, "[c%d]\ntype=aor\ncontact=sip:c%d@127.0.0.1:%d\nqualify_frequency=60\n\n", i, i, 5060+i%10*100)
	}
	return src.Bytes()
}

// BenchmarkParseAoRs parses a file of 100,000 AoRs: the reader's time and
// allocations per file, a tenth of a million-AoR deployment's.
func BenchmarkParseAoRs(b *testing.B) {
	src := aorFile(100000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("pjsip.conf", src, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseAppends parses a file of 20,000 AoRs, then as many
// "[cN](+type=aor)" sections adding qualifyd's options to them, as
// qualifyd.conf does to the PBX's file (doc.go). Finding each append's
// section by scanning every section made this quadratic.
func BenchmarkParseAppends(b *testing.B) {
	src := bytes.NewBuffer(aorFile(20000))
	for i := range 20000 {
		fmt.Fprintf(src, "[c%d](+type=aor)\nqualify_failures=3\n", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("pjsip.conf", src.Bytes(), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEndpoints parses a file of 20,000 endpoints, each with its
// AoR, as a hosted PBX's pjsip.conf has them. Finding each AoR's endpoint
// by scanning all of them made this quadratic: 9 s at 40,000.
func BenchmarkParseEndpoints(b *testing.B) {
	var src strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&src, "[c%d]\ntype=endpoint\naors=c%d\nfrom_user=u%d\n\n[c%d]\ntype=aor\ncontact=sip:c%d@192.0.2.1\nqualify_frequency=60\n\n", i, i, i, i, i)
	}
	for b.Loop() {
		if _, err := Parse("pjsip.conf", []byte(src.String()), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFind checks which section a template name or an append finds
// through the index by name: the first of that name, in any case, that
// the filter matches; never a later one, a template for an append, or a
// section defined after the header.
func TestFind(t *testing.T) {
	policy := func(f, n, m string) string {
		return "aor a pjsip.conf:%d\n  policy F=" + f + " T=3s N=" + n + " R=0s D=0s M=" + m + " 2xx=false latency=false\n" + noProbe
	}
	tests := []struct {
		name, src string
		line      int
		want      string
	}{
		{"inherit: the first of two templates", "[t](!)\nqualify_frequency=10\n[t](!)\nqualify_frequency=20\n[a](t)\ntype=aor",
			5, policy("10s", "1", "1")},
		{"inherit: a template or a section, whichever is first", "[t]\nqualify_failures=2\n[t](!)\nqualify_failures=3\n[a](T)\ntype=aor",
			5, policy("0s", "2", "1")},
		{"inherit: case-insensitive beyond ASCII", "[\u017fip](!)\nqualify_failures=4\n[a](SIP)\ntype=aor",
			3, policy("0s", "4", "1")},
		{"inherit: sections after the index is built are found", "[t](!)\n[x](t)\n[u](!)\nqualify_successes=2\n[U](!)\nqualify_successes=3\n[a](u)\ntype=aor",
			7, policy("0s", "1", "2")},
		{"append: skips templates", "[a](!)\nqualify_failures=5\n[a]\ntype=aor\n[A](+)\nqualify_successes=2",
			3, policy("0s", "1", "2")},
		{"append: the first non-template, not a later one", "[t](!)\n[b](t)\n[a]\ntype=aor\n[a]\ntype=endpoint\n[a](+)\nqualify_successes=2",
			3, policy("0s", "1", "2")},
		{"append: the first the filter matches", "[a]\ntype=endpoint\n[a]\ntype=aor\n[a]\ntype=auth\n[a](+type=aor)\nqualify_failures=6",
			3, policy("0s", "6", "1")},
		{"append: TEMPLATES=restrict finds the template", "[t](!)\nqualify_failures=2\n[t]\nqualify_failures=3\n[t](+TEMPLATES=restrict)\nqualify_successes=4\n[a](t)\ntype=aor",
			7, policy("0s", "2", "4")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFiles(tt.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := aorLines(cfg), fmt.Sprintf(tt.want, tt.line); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestFoldKey checks that two names share an index key exactly when
// strings.EqualFold, Asterisk's strcasecmp for qualifyd, holds.
func TestFoldKey(t *testing.T) {
	names := []string{"pbx07", "PBX07", "Pbx07", "pbx7", "sip", "SIP", "\u017fip", "kilo", "\u212Ailo", "KILO",
		"\u03a3\u03c3", "\u03c2\u03a3", "caf\u00e9", "CAF\u00c9", "\xff", "\xfe", "\ufffd", "", "a\xffb", "A\ufffdB", "i", "\u0130", "\u0131"}
	for _, x := range names {
		for _, y := range names {
			if got, want := foldKey(x) == foldKey(y), strings.EqualFold(x, y); got != want {
				t.Errorf("foldKey(%q) == foldKey(%q) is %v, EqualFold is %v", x, y, got, want)
			}
		}
	}
}
