package sink

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

func TestHostPort(t *testing.T) {
	for uri, want := range map[string]string{
		"sip:gw1@198.51.100.1":                "198.51.100.1:5060",
		"sip:198.51.100.1:5070;transport=tcp": "198.51.100.1:5070",
		"SIP:GW.Example.NET.":                 "gw.example.net:5060",
		"sips:gw.example.net":                 "gw.example.net:5061",
		"sip:[2001:DB8:0::1]:5080":            "[2001:db8::1]:5080",
		"sip:u:pw@[::ffff:192.0.2.1]?h=v":     "192.0.2.1:5060",
		"<sip:trunk@192.0.2.7:5060;lr>":       "",
		"tel:+15551234":                       "",
		"sip:[2001:db8::1":                    "",
		"sip:192.0.2.7:5060;maddr=192.0.2.8":  "192.0.2.7:5060",
		"  sip:user@host.example.org:5062  ":  "host.example.org:5062",
	} {
		got, ok := hostPort(uri)
		if got != want || ok != (want != "") {
			t.Errorf("hostPort(%q) = %q, %v; want %q", uri, got, ok, want)
		}
	}
}

func TestPlans(t *testing.T) {
	on := &qualify.Policy{Frequency: 30}
	conf := &pjsip.Config{
		AoRs: []pjsip.AoR{
			{AoR: probe.AoR{Name: "a", Contacts: []string{"sip:192.0.2.1", "sip:192.0.2.2:5060"}, Policy: on}},
			{AoR: probe.AoR{Name: "b", Contacts: []string{"sip:x@192.0.2.1:5060"}, Policy: on}},
			{AoR: probe.AoR{Name: "off", Contacts: []string{"sip:192.0.2.9"}}},
		},
		Endpoints: []pjsip.Endpoint{{Name: "e", AoRs: []string{"a", "off"}}},
	}
	keys := func(p *plan) []string {
		var out []string
		for k, deps := range p.deps {
			out = append(out, k.Kind.String()+":"+k.Name+k.URI+"<"+strings.Join(deps, ","))
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		sink pjsip.Sink
		want []string
	}{
		{pjsip.Sink{Driver: "ami"}, []string{"device:b<b", "device:e<a"}},
		{pjsip.Sink{Driver: "ami", Method: "maintenance"}, []string{"device:e<a"}},
		{pjsip.Sink{Driver: "ami", AoRs: []string{"off"}}, []string{"device:e<off"}},
		{pjsip.Sink{Driver: "kamailio"}, []string{"host:192.0.2.1:5060<a,b", "host:192.0.2.2:5060<a"}},
		{pjsip.Sink{Driver: "webhook", AoRs: []string{"a"}}, []string{"aor:a<a", "contact:asip:192.0.2.1<a",
			"contact:asip:192.0.2.2:5060<a", "endpoint:e<a"}},
	} {
		if got := keys(newPlan(&tc.sink, conf)); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s %v: objects %q, want %q", tc.sink.Driver, tc.sink.Method, tc.sink.AoRs, got, tc.want)
		}
	}
	// A host shared by two AoRs is down only when both its contacts are.
	src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{
		"a": {{URI: "sip:192.0.2.1", Status: qualify.Unreachable, Last: engine.LastResult{Reason: qualify.ReasonTimeout}},
			{URI: "sip:192.0.2.2:5060", Status: qualify.Reachable}},
		"b": {{URI: "sip:x@192.0.2.1:5060", Status: qualify.Unreachable, LatencyOnly: true}},
	}}
	p := newPlan(&pjsip.Sink{Driver: "kamailio"}, conf)
	if l, _, _ := p.level(host("192.0.2.1:5060"), src); l != Up {
		t.Fatalf("shared host %v: the latency-only contact is routable", l)
	}
	src.aors["b"][0].LatencyOnly = false
	if l, _, _ := p.level(host("192.0.2.1:5060"), src); l != Down {
		t.Fatalf("shared host %v", l)
	}
	w := newPlan(&pjsip.Sink{Driver: "webhook"}, conf)
	if l, r, _ := w.level(Key{Kind: KindContact, Name: "a", URI: "sip:192.0.2.1"}, src); l != Down || r != qualify.ReasonTimeout {
		t.Fatalf("contact %v %v", l, r)
	}
	if l, r, _ := w.level(Key{Kind: KindAoR, Name: "a"}, src); l != Up || r != qualify.ReasonNone {
		t.Fatalf("aor %v %v", l, r)
	}
}

// TestLevelRecoveringIsNoEvidence: a Down's evidence is its failed
// probes; a contact still down after a success (recovering towards
// qualify_successes) gives none, so that after a panic a held object
// waits for the contact's recovery or its next failure, never goes down
// on the success.
func TestLevelRecoveringIsNoEvidence(t *testing.T) {
	conf := &pjsip.Config{AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "a", Contacts: []string{"sip:192.0.2.1"}, Policy: &qualify.Policy{Frequency: time.Minute}}}}}
	failed := time.Unix(1_800_000_000, 0)
	src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{
		"a": {{URI: "sip:192.0.2.1", Status: qualify.Unreachable, Last: engine.LastResult{At: failed, Reason: qualify.ReasonTimeout}}},
	}}
	p := newPlan(&pjsip.Sink{Driver: "webhook"}, conf)
	k := Key{Kind: KindContact, Name: "a", URI: "sip:192.0.2.1"}
	sent := failed.Add(-qualify.SIPTransactionTimeout) // qualify_timeout unset
	if l, _, since := p.level(k, src); l != Down || !since.Equal(sent) {
		t.Fatalf("failed probe: %v since %v, want Down since %v", l, since, sent)
	}
	src.aors["a"][0].Last = engine.LastResult{At: failed.Add(time.Minute), OK: true}
	if l, _, since := p.level(k, src); l != Down || !since.IsZero() {
		t.Fatalf("recovering: %v since %v, want Down resting on no probe", l, since)
	}
}

// TestUnsetTimeoutIsTheTransactionTimeout: qualify_timeout <= 0 is the
// SIP transaction timeout (32 s) for a probe's deadline, and so for the
// evidence a Down rests on (its probes' ends less T) and for the lower
// mark's wait (F + T), never 0.
func TestUnsetTimeoutIsTheTransactionTimeout(t *testing.T) {
	failed := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{2 * time.Second, 2 * time.Second},
		{0, qualify.SIPTransactionTimeout},
		{-time.Second, qualify.SIPTransactionTimeout},
	} {
		p := &qualify.Policy{Frequency: time.Minute, Timeout: tc.timeout}
		conf := &pjsip.Config{AoRs: []pjsip.AoR{{AoR: probe.AoR{Name: "a", Contacts: []string{"sip:192.0.2.1"}, Policy: p}}}}
		src := &fakeEngine{aors: map[string][]engine.ContactSnapshot{
			"a": {{URI: "sip:192.0.2.1", Status: qualify.Unreachable, Last: engine.LastResult{At: failed, Reason: qualify.ReasonTimeout}}},
		}, policy: *p}
		k := Key{Kind: KindContact, Name: "a", URI: "sip:192.0.2.1"}
		if _, _, since := newPlan(&pjsip.Sink{Driver: "webhook"}, conf).level(k, src); !since.Equal(failed.Add(-tc.want)) {
			t.Errorf("qualify_timeout %v: the Down rests on probes since %v, want %v", tc.timeout, since, failed.Add(-tc.want))
		}
		if got := holdBound(conf); got != time.Minute+tc.want {
			t.Errorf("qualify_timeout %v: the lower mark waits %v, want %v", tc.timeout, got, time.Minute+tc.want)
		}
	}
}

// TestDrainingIsDownNotFailing: a draining contact (qualify-semantics
// §11.4) is out of routing, unless latency-only, whatever its status,
// and never failing for the panic.
func TestDrainingIsDownNotFailing(t *testing.T) {
	for _, c := range []struct {
		c    engine.ContactSnapshot
		want Level
	}{
		{engine.ContactSnapshot{Status: qualify.Reachable, Phase: qualify.Draining}, Down},
		{engine.ContactSnapshot{Status: qualify.NonQualified, Phase: qualify.Draining}, Down},
		{engine.ContactSnapshot{Status: qualify.Reachable, Phase: qualify.Draining, LatencyOnly: true}, Up},
		{engine.ContactSnapshot{Status: qualify.Reachable, Phase: qualify.Healthy}, Up},
	} {
		if got := contactLevel(&c.c); got != c.want {
			t.Errorf("%+v: level %v, want %v", c.c, got, c.want)
		}
		if h := healthOf(&c.c); c.c.Phase == qualify.Draining && h != healthy {
			t.Errorf("%+v: health %v, want healthy", c.c, h)
		}
	}
}
