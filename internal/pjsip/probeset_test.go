package pjsip

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestAoRsShareProbeOptions: AoRs probed the same way point to one copy of
// their options, and AoRs with the same policy to one copy of it; an AoR
// without options has none.
func TestAoRsShareProbeOptions(t *testing.T) {
	src := "[t](!)\ntype=aor\noutbound_proxy=sip:proxy.example\n" +
		"[a](t)\n[b](t)\n[c]\ntype=aor\nqualify_frequency=30\n[d]\ntype=aor\nqualify_frequency=30\n" +
		"[e1]\ntype=endpoint\naors=c\nfrom_user=pbx\n[e2]\ntype=endpoint\naors=d\nfrom_user=pbx\n"
	cfg, err := Parse("pjsip.conf", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*AoR{}
	for i := range cfg.AoRs {
		by[cfg.AoRs[i].Name] = &cfg.AoRs[i]
	}
	a, b, c, d := by["a"], by["b"], by["c"], by["d"]
	if a.Probe == nil || a.Probe != b.Probe || a.Probe.OutboundProxy != "sip:proxy.example" {
		t.Errorf("a and b: %p %p %+v, want one shared copy with the template's proxy", a.Probe, b.Probe, a.Probe)
	}
	if c.Probe == nil || c.Probe != d.Probe || c.Probe.FromUser != "pbx" {
		t.Errorf("c and d: %p %p %+v, want one shared copy with their endpoints' From user", c.Probe, d.Probe, c.Probe)
	}
	if a.Policy != b.Policy || c.Policy != d.Policy || a.Policy == c.Policy ||
		a.Policy.Frequency != 0 || c.Policy.Frequency != 30*time.Second {
		t.Errorf("policies %p %p %p %p (%v, %v): want a and b sharing the default, c and d sharing F = 30 s",
			a.Policy, b.Policy, c.Policy, d.Policy, a.Policy.Frequency, c.Policy.Frequency)
	}
	cfg, err = Parse("pjsip.conf", []byte("[x]\ntype=aor\n"), Options{})
	if err != nil || cfg.AoRs[0].Probe != nil {
		t.Errorf("an AoR without options: %+v, %v; want nil options", cfg.AoRs[0].Probe, err)
	}
}

// TestProbeOptionsKeepNoFileText: the shared options are copied out of the
// file, so a configuration does not keep its file's text alive (here 8 MB
// of comments beside one AoR with an outbound_proxy).
func TestProbeOptionsKeepNoFileText(t *testing.T) {
	const pad = 8 << 20
	path := filepath.Join(t.TempDir(), "pjsip.conf")
	src := "[a]\ntype=aor\noutbound_proxy=sip:proxy.example\n" + strings.Repeat(";"+strings.Repeat("x", 99)+"\n", pad/101)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	src = ""
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cfg, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > pad/2 {
		t.Errorf("the configuration keeps %d bytes, the file is %d", kept, pad)
	}
	if cfg.AoRs[0].Probe.OutboundProxy != "sip:proxy.example" {
		t.Errorf("options %+v", cfg.AoRs[0].Probe)
	}
}
