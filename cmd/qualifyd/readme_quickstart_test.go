package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// quickStartConf returns the README's qualifyd.conf of a quick start: the
// first code block of the section that starts with from, with its /etc
// paths moved into dir, where the PBX's pjsip.conf and the secret are.
func quickStartConf(t *testing.T, from, block, dir string) *pjsip.Config {
	t.Helper()
	section := docSection(t, "README.md", from, "## ")
	_, src, ok := strings.Cut(section, "```\n"+block)
	if !ok {
		t.Fatalf("README.md: %q has no block starting %q", from, block)
	}
	src, _, _ = strings.Cut(block+src, "```\n")
	src = strings.NewReplacer("/etc/asterisk/", dir+"/", "/etc/qualifyd/", dir+"/").Replace(src)
	cfg, err := pjsip.Parse(filepath.Join(dir, "qualifyd.conf"), []byte(src), pjsip.Options{ConfigDir: dir})
	if err != nil {
		t.Fatalf("README.md's %q: %v\n%s", from, err, src)
	}
	return cfg
}

// TestREADMEQuickStartAsterisk: the first quick start's file reads with
// the PBX's pjsip.conf it describes: pbx07 qualified by qualifyd every
// 30 s, three failures with a 2 s retry, and one ami sink on endpoint
// maintenance that follows it.
func TestREADMEQuickStartAsterisk(t *testing.T) {
	dir := t.TempDir()
	pbx := "[pbx07]\ntype=endpoint\naors=pbx07\n\n[pbx07]\ntype=aor\ncontact=sip:pbx07@192.0.2.7:5060\nqualify_frequency=0\n"
	for name, text := range map[string]string{"pjsip.conf": pbx, "ami.secret": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := quickStartConf(t, "## Quick start 1", "; /etc/qualifyd/qualifyd.conf\n", dir)
	if len(cfg.AoRs) != 1 || len(cfg.Sinks) != 1 {
		t.Fatalf("%d AoRs, %d sinks", len(cfg.AoRs), len(cfg.Sinks))
	}
	p := cfg.AoRs[0].PolicyValue()
	r := p.Report()
	if s := cfg.Sinks[0]; r.Frequency != 30 || r.Failures != 3 || r.RetryInterval != 2 || s.Driver != "ami" || s.Method != "maintenance" || s.AoRs != nil {
		t.Fatalf("policy %+v, sink %s method %s aors %v", r, s.Driver, s.Method, s.AoRs)
	}
}

// TestREADMEQuickStartKamailio: the second quick start's file reads: a
// kamailio source with the template's policy and a kamailio sink that
// follows every AoR, on the same router.
func TestREADMEQuickStartKamailio(t *testing.T) {
	cfg := quickStartConf(t, "## Quick start 2", "; /etc/qualifyd/qualifyd.conf\n", t.TempDir())
	if len(cfg.Sources) != 1 || len(cfg.Sinks) != 1 {
		t.Fatalf("%d sources, %d sinks", len(cfg.Sources), len(cfg.Sinks))
	}
	src, sink := cfg.Sources[0], cfg.Sinks[0]
	if src.Driver != "kamailio" || src.Template != "gw-defaults" || sink.Driver != "kamailio" || sink.URL != src.URL || sink.AoRs != nil {
		t.Fatalf("source %+v, sink %+v", src, sink)
	}
}

// TestREADMEQuickStartCluster: the third quick start's section is a
// cluster of three nodes with mutual TLS and a route secret, which each of
// the nodes accepts (the files it names aside: TestClusterREADMECertificates
// runs a cluster with the certificates of docs/cluster.md's commands).
func TestREADMEQuickStartCluster(t *testing.T) {
	cfg := quickStartConf(t, "## Quick start 3", "[cluster]\n", t.TempDir())
	if cfg.Cluster == nil {
		t.Fatal("no cluster section")
	}
	var c cluster.Config
	for _, o := range cfg.Cluster.Options {
		if err := c.Set(o.Key, o.Value); err != nil {
			t.Fatalf("%s=%s: %v", o.Key, o.Value, err)
		}
	}
	if len(c.Nodes) != 3 || c.TLSCert == "" || c.TLSKey == "" || c.TLSCA == "" || c.SecretFile == "" || c.InsecureRoutes {
		t.Fatalf("cluster %+v", c)
	}
}
