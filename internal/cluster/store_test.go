package cluster

import "testing"

// TestStoreNodeSubstitution: every {node} of store= is the node's name,
// so that nodes sharing a host or a volume each have their own JetStream
// directory from one file.
func TestStoreNodeSubstitution(t *testing.T) {
	for _, tc := range []struct{ store, self, want string }{
		{"/var/lib/qualifyd/cluster-{node}", "b", "/var/lib/qualifyd/cluster-b"},
		{"/srv/{node}/js/{node}", "node_2", "/srv/node_2/js/node_2"},
		{"cluster", "a", "cluster"},
	} {
		var c Config
		for _, o := range [][2]string{{"nodes", "a@127.0.0.1:6222,b@127.0.0.1:6223,node_2@127.0.0.1:6224"}, {"store", tc.store}} {
			if err := c.Set(o[0], o[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Finish(tc.self); err != nil {
			t.Fatal(err)
		}
		if c.Store != tc.want {
			t.Errorf("store=%s on node %s is %q, want %q", tc.store, tc.self, c.Store, tc.want)
		}
	}
}
