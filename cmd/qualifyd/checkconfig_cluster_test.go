package main

import (
	"path/filepath"
	"strings"
	"testing"
)

const clusterConf = `[t]
type=aor
contact=sip:192.0.2.1:5060
qualify_frequency=30

[c]
type=cluster
nodes=a@10.0.0.1:6222,b@10.0.1.1:6222,c@10.0.2.1:6222
quorum=all
store=/var/lib/qualifyd/cluster
insecure_routes=yes
`

func TestCheckConfigPrintsTheCluster(t *testing.T) {
	dir := writeConfig(t, map[string]string{"q.conf": clusterConf})
	code, stdout, stderr := checkConfig(filepath.Join(dir, "q.conf"))
	want := "cluster c: 3 nodes (a@10.0.0.1:6222, b@10.0.1.1:6222, c@10.0.2.1:6222), vantages 3, quorum all, NATS embedded, store /var/lib/qualifyd/cluster, name qualifyd-205830ca, routes in clear (insecure_routes=yes), member_ttl 6s, lease_ttl 6s\n"
	if code != 0 || stderr != "" || !strings.HasSuffix(stdout, want) {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant it to end with:\n%s", code, stderr, stdout, want)
	}
}

// TestCheckConfigPrintsFewerVantages: fewer vantages than nodes, written
// or by default with 4 nodes, are printed, not refused.
// An even vantages under majority, and two nodes (allowed), are warned
// of at the section's line.
func TestCheckConfigPrintsFewerVantages(t *testing.T) {
	tests := []struct{ section, want, warn string }{
		{"nodes=a@h:1,b@h:2,c@h:3\nvantages=2\nstore=/s\ninsecure_routes=yes\n", "cluster c: 3 nodes (a@h:1, b@h:2, c@h:3), vantages 2, quorum majority",
			`:5: section "c": vantages=2 is even: with quorum=majority a split of the votes (1 against 1) keeps a contact's status; an odd count decides every split`},
		{"nodes=a@h:1,b@h:2,c@h:3,d@h:4\nstore=/s\ninsecure_routes=yes\n", "cluster c: 4 nodes (a@h:1, b@h:2, c@h:3, d@h:4), vantages 3, quorum majority", ""},
		{"nodes=a@h:1,b@h:2\nallow_two_nodes=yes\nquorum=all\nstore=/s\ninsecure_routes=yes\n", "cluster c: 2 nodes (a@h:1, b@h:2), vantages 2, quorum all",
			`:5: section "c": nodes= has two nodes (allow_two_nodes=yes): the loss of either node stops every push until it is back`},
		{"nodes=a@h:1,b@h:2\nallow_two_nodes=On\nquorum=all\nstore=/s\ninsecure_routes=true\n", "cluster c: 2 nodes (a@h:1, b@h:2), vantages 2, quorum all",
			`:5: section "c": nodes= has two nodes (allow_two_nodes=yes): the loss of either node stops every push until it is back`},
	}
	for _, tt := range tests {
		file := filepath.Join(writeConfig(t, map[string]string{"q.conf": "[t]\ntype=aor\ncontact=sip:192.0.2.1\n\n[c]\ntype=cluster\n" + tt.section}), "q.conf")
		code, stdout, stderr := checkConfig(file)
		want := ""
		if tt.warn != "" {
			want = "qualifyd check-config: warning: " + file + tt.warn + "\n"
		}
		if code != 0 || stderr != want || !strings.Contains(stdout, tt.want) {
			t.Errorf("exit %d, stderr %q (want %q), stdout:\n%s\nwant it to hold %q", code, stderr, want, stdout, tt.want)
		}
	}
}

func TestCheckConfigRefusesABrokenCluster(t *testing.T) {
	tests := []struct{ name, section, want string }{
		{"bad quorum", "nodes=a@10.0.0.1:6222\nquorum=most\nstore=/s\n",
			`:8: section "c": option "quorum": invalid value: "most": want majority, all or any`},
		{"unknown option", "nodes=a@10.0.0.1:6222\nleader=a\nstore=/s\n",
			`:8: section "c": option "leader": unknown option: a cluster section has nodes, vantages, quorum, store, nats_url, member_ttl, lease_ttl, allow_two_nodes, name, tls_cert, tls_key, tls_ca, secret_file, insecure_routes, nats_ca, nats_cert, nats_key, nats_creds, nats_nkey, nats_user, nats_password_file, insecure_nats`},
		{"two nodes", "nodes=a@h:1,b@h:2\nstore=/s\n",
			`:5: section "c": invalid value: nodes= has two nodes: JetStream's quorum is then both, and the loss of either stops every push; use three (or one), or set allow_two_nodes=yes`},
		{"no store", "nodes=a@10.0.0.1:6222\n",
			`:5: section "c": invalid value: store= is required for the embedded NATS server (or nats_url=)`},
		{"not a boolean", "nodes=a@10.0.0.1:6222\nstore=/s\ninsecure_routes=sure\n",
			`:9: section "c": option "insecure_routes": invalid value: "sure" is not a boolean (yes or no)`},
		{"more vantages than nodes", "nodes=a@h:1,b@h:2,c@h:3\nvantages=4\nstore=/s\n",
			`:5: section "c": invalid value: vantages=4 is more than the 3 nodes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(writeConfig(t, map[string]string{"q.conf": "[t]\ntype=aor\ncontact=sip:192.0.2.1\n\n[c]\ntype=cluster\n" + tt.section}), "q.conf")
			code, stdout, stderr := checkConfig(file)
			if want := "qualifyd check-config: " + file + tt.want + "\n"; code != 1 || stdout != "" || stderr != want {
				t.Fatalf("exit %d, stdout %q, stderr\n got: %q\nwant: %q", code, stdout, stderr, want)
			}
		})
	}
}
