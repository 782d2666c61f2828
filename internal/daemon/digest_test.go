package daemon

import (
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// digestConf is a configuration with one AoR, one endpoint and one sink.
func digestConf() *pjsip.Config {
	p := &qualify.Policy{Frequency: time.Minute, Timeout: 3 * time.Second, Failures: 2}
	return &pjsip.Config{
		AoRs:      []pjsip.AoR{{AoR: probe.AoR{Name: "t", Contacts: []string{"sip:t@192.0.2.1"}, Policy: p}, File: "a.conf", Line: 1}},
		Endpoints: []pjsip.Endpoint{{Name: "t", AoRs: []string{"t"}}},
		Sinks: []*pjsip.Sink{{Name: "edge", Driver: "kamailio", URL: "http://127.0.0.1:5071/RPC", Timeout: 5 * time.Second,
			HeartbeatInterval: 10 * time.Second, FailOpenAfter: 30 * time.Second, File: "a.conf", Line: 9, Secret: "x"}},
		Panic: pjsip.Panic{Threshold: 50, MinDestinations: 10},
	}
}

// TestDigestCoversWhatIsPushed: two files that would push differently
// (a sink, a policy, an endpoint, the panic rule, as well as the AoRs)
// have different digests; where a section is, and a secret, change
// nothing.
func TestDigestCoversWhatIsPushed(t *testing.T) {
	base := digestOf(digestConf())
	if again := digestOf(digestConf()); again != base {
		t.Fatalf("the same configuration has digests %s and %s", base, again)
	}
	differ := map[string]func(c *pjsip.Config){
		"a contact": func(c *pjsip.Config) { c.AoRs[0].Contacts = []string{"sip:t@192.0.2.2"} },
		"qualify_failures": func(c *pjsip.Config) {
			c.AoRs[0].Policy = &qualify.Policy{Frequency: time.Minute, Timeout: 3 * time.Second, Failures: 3}
		},
		"an endpoint's aors":   func(c *pjsip.Config) { c.Endpoints[0].AoRs = nil },
		"a sink's url":         func(c *pjsip.Config) { c.Sinks[0].URL = "http://127.0.0.1:5072/RPC" },
		"a sink's aors":        func(c *pjsip.Config) { c.Sinks[0].AoRs = []string{} },
		"a sink's failopen":    func(c *pjsip.Config) { c.Sinks[0].FailOpenAfter = time.Minute },
		"another sink":         func(c *pjsip.Config) { c.Sinks = append(c.Sinks, &pjsip.Sink{Name: "hook", Driver: "webhook"}) },
		"panic_threshold":      func(c *pjsip.Config) { c.Panic.Threshold = 60 },
		"panic_hold_threshold": func(c *pjsip.Config) { c.Panic.HoldThreshold = 20 },
		"no qualify policy":    func(c *pjsip.Config) { c.AoRs[0].Policy = nil },
		"the same AoR renamed": func(c *pjsip.Config) { c.AoRs[0].Name = "u" },
	}
	for what, change := range differ {
		c := digestConf()
		change(c)
		if digestOf(c) == base {
			t.Errorf("%s changed, the digest did not", what)
		}
	}
	same := map[string]func(c *pjsip.Config){
		"the sections' lines": func(c *pjsip.Config) { c.AoRs[0].Line, c.Sinks[0].Line, c.Sinks[0].File = 7, 70, "b.conf" },
		"a sink's secret":     func(c *pjsip.Config) { c.Sinks[0].Secret, c.Sinks[0].SecretFile = "y", "/etc/qualifyd/hook.secret" },
		"an equal policy":     func(c *pjsip.Config) { p := *c.AoRs[0].Policy; c.AoRs[0].Policy = &p },
	}
	for what, change := range same {
		c := digestConf()
		change(c)
		if got := digestOf(c); got != base {
			t.Errorf("%s changed the digest (%s, was %s)", what, got, base)
		}
	}
}
