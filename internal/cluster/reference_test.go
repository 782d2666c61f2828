package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/docref"
)

// TestReferenceClusterOptions: the configuration reference's type=cluster
// table lists exactly Options, each with the default a section of only
// the required options gets.
func TestReferenceClusterOptions(t *testing.T) {
	var c Config
	for _, o := range [][2]string{{"nodes", "a@127.0.0.1:6222,b@127.0.0.1:6223,c@127.0.0.1:6224,d@127.0.0.1:6225"}, {"store", t.TempDir()}} {
		if err := c.Set(o[0], o[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Finish("a"); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"nodes":           docref.Required{},
		"store":           docref.Required{},
		"quorum":          c.Quorum.String(),
		"member_ttl":      c.MemberTTL.Seconds(),
		"lease_ttl":       c.LeaseTTL.Seconds(),
		"allow_two_nodes": c.AllowTwoNodes,
		"insecure_routes": c.InsecureRoutes,
		"insecure_nats":   c.InsecureNATS,
		// Checked below: defaults that depend on the nodes.
		"vantages": nil,
		"name":     nil,
	}
	for _, o := range Options {
		if _, ok := want[o]; !ok {
			want[o] = "" // a file, a URL or a user: none unless given
		}
	}
	if len(want) != len(Options) {
		t.Fatalf("the test knows options Options does not have: %v", want)
	}
	const page = "../../docs/configuration.md"
	docref.CheckTable(t, page, "## `type=cluster`", want, nil)
	rows, err := docref.Options(page, "## `type=cluster`")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		switch d := r.Default(0); r.Options[0] {
		case "vantages":
			// Four nodes: the default stops short of every node.
			if c.Vantages != min(4, MaxDefaultVantages) || d != fmt.Sprintf("every node, at most %d", c.Vantages) {
				t.Errorf("vantages: %d of 4 nodes by default, the reference says %q", c.Vantages, d)
			}
		case "name":
			if !strings.HasPrefix(c.Name, "qualifyd-") || c.Name != DefaultName(c.Nodes) || !strings.HasPrefix(d, "qualifyd- and a hash of the nodes' names") {
				t.Errorf("name: %q by default, the reference says %q", c.Name, d)
			}
		}
	}
}
