package cluster

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestConfigSetErrors(t *testing.T) {
	tests := []struct {
		option, value, want string
		sentinel            error
	}{
		{"nodes", "a@10.0.0.1:6222,a@10.0.0.2:6222", `invalid value: "a@10.0.0.2:6222": a node's name and route address appear once`, ErrValue},
		{"nodes", "a@10.0.0.1:6222,b@10.0.0.1:6222", `invalid value: "b@10.0.0.1:6222": a node's name and route address appear once`, ErrValue},
		{"nodes", "a.b@10.0.0.1:6222", `invalid value: "a.b@10.0.0.1:6222": a node's name has only letters, digits, '-' and '_'`, ErrValue},
		{"nodes", "@10.0.0.1:6222", `invalid value: "@10.0.0.1:6222": a node's name has 1 to 64 characters`, ErrValue},
		{"nodes", "a@10.0.0.1", `invalid value: "a@10.0.0.1": want host:port`, ErrValue},
		{"nodes", "a@10.0.0.1:70000", `invalid value: "a@10.0.0.1:70000": port "70000" is not 1-65535`, ErrValue},
		{"nodes", "a@10.0.0.1:6222,", `invalid value: "": a node's name has 1 to 64 characters`, ErrValue},
		{"vantages", "0", `invalid value: "0": want a number of nodes, at least 1`, ErrValue},
		{"vantages", "two", `invalid value: "two": want a number of nodes, at least 1`, ErrValue},
		{"quorum", "most", `invalid value: "most": want majority, all or any`, ErrValue},
		{"store", "", `invalid value: empty`, ErrValue},
		{"nats_url", "nats.example.net:4222", `invalid value: "nats.example.net:4222": want nats://host:port`, ErrValue},
		{"nats_url", "http://nats.example.net:4222", `invalid value: "http://nats.example.net:4222": scheme "http" is not nats, tls, ws or wss`, ErrValue},
		{"nats_url", "http://q:s3cret@nats.example.net:4222", `invalid value: "http://q:xxxxx@nats.example.net:4222": scheme "http" is not nats, tls, ws or wss`, ErrValue},
		{"nats_url", "q:s3cret@nats.example.net:4222", `invalid value: "xxxxx@nats.example.net:4222": want nats://host:port`, ErrValue},
		{"member_ttl", "0", `invalid value: "0": want whole seconds, 1 to 3600`, ErrValue},
		{"lease_ttl", "2s", `invalid value: "2s": want whole seconds, 1 to 3600`, ErrValue},
		{"lease_ttl", "3601", `invalid value: "3601": want whole seconds, 1 to 3600`, ErrValue},
		{"allow_two_nodes", "maybe", `invalid value: "maybe" is not a boolean (yes or no)`, ErrValue},
		{"leader", "a", `unknown option: a cluster section has nodes, vantages, quorum, store, nats_url, member_ttl, lease_ttl, allow_two_nodes, name, tls_cert, tls_key, tls_ca, secret_file, insecure_routes, nats_ca, nats_cert, nats_key, nats_creds, nats_nkey, nats_user, nats_password_file, insecure_nats`, ErrUnknownOption},
	}
	for _, tt := range tests {
		t.Run(tt.option+"="+tt.value, func(t *testing.T) {
			var c Config
			err := c.Set(tt.option, tt.value)
			if err == nil || err.Error() != tt.want || !errors.Is(err, tt.sentinel) {
				t.Fatalf("Set(%q, %q) = %v, want %q (wrapping %v)", tt.option, tt.value, err, tt.want, tt.sentinel)
			}
		})
	}
}

// set applies options in order, failing the test on an error.
func set(t *testing.T, opts ...string) Config {
	t.Helper()
	var c Config
	for i := 0; i < len(opts); i += 2 {
		if err := c.Set(opts[i], opts[i+1]); err != nil {
			t.Fatalf("Set(%q, %q): %v", opts[i], opts[i+1], err)
		}
	}
	return c
}

func TestConfigFinishErrors(t *testing.T) {
	three := "a@10.0.0.1:6222,b@10.0.1.1:6222,c@10.0.2.1:6222"
	tests := []struct {
		name string
		opts []string
		self string
		want string
	}{
		{"no nodes", []string{"store", "/s"}, "a", "invalid value: nodes= is required: name@host:port of each node"},
		{"no self", []string{"nodes", three, "store", "/s"}, "", "invalid value: the node's name is required (--node NAME, one of a,b,c)"},
		{"self unknown", []string{"nodes", three, "store", "/s"}, "d", `invalid value: node "d" is not in nodes= (a,b,c)`},
		{"too many vantages", []string{"vantages", "4", "nodes", three, "store", "/s"}, "a", "invalid value: vantages=4 is more than the 3 nodes"},
		{"no store", []string{"nodes", three}, "a", "invalid value: store= is required for the embedded NATS server (or nats_url=)"},
		{"store and url", []string{"nodes", "a,b", "store", "/s", "nats_url", "nats://n:4222"}, "a", "invalid value: store= is the embedded server's; with nats_url= nothing is embedded"},
		{"no route", []string{"nodes", "a@10.0.0.1:6222,b", "store", "/s"}, "a", `invalid value: node "b" has no route address (name@host:port), which the embedded server needs`},
		{"two nodes", []string{"nodes", "a@10.0.0.1:6222,b@10.0.1.1:6222", "store", "/s"}, "a", "invalid value: nodes= has two nodes: JetStream's quorum is then both, and the loss of either stops every push; use three (or one), or set allow_two_nodes=yes"},
		{"two nodes, no", []string{"nodes", "a@10.0.0.1:6222,b@10.0.1.1:6222", "store", "/s", "allow_two_nodes", "no"}, "a", "invalid value: nodes= has two nodes: JetStream's quorum is then both, and the loss of either stops every push; use three (or one), or set allow_two_nodes=yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := set(t, tt.opts...)
			err := c.Finish(tt.self)
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrValue) {
				t.Fatalf("Finish = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		nodes    string
		vantages int
	}{
		{"a@h:1", 1},
		{"a@h:1,b@h:2", 2},
		{"a@h:1,b@h:2,c@h:3", 3},
		{"a@h:1,b@h:2,c@h:3,d@h:4,e@h:5", 3},
	}
	for _, tt := range tests {
		c := set(t, "nodes", tt.nodes, "store", "/var/lib/qualifyd/cluster", "allow_two_nodes", "yes", "insecure_routes", "yes")
		if err := c.Finish("a"); err != nil {
			t.Fatal(err)
		}
		if c.Vantages != tt.vantages || c.Quorum != Majority || c.MemberTTL != DefaultMemberTTL || c.LeaseTTL != DefaultLeaseTTL || !c.AllowTwoNodes {
			t.Errorf("%s: %+v, want vantages=%d, majority, default TTLs", tt.nodes, c, tt.vantages)
		}
		if want := min(3, tt.vantages); c.Replicas() != want {
			t.Errorf("%s: replicas %d, want %d", tt.nodes, c.Replicas(), want)
		}
	}
}

func TestConfigTTLs(t *testing.T) {
	c := set(t, "nodes", "a@127.0.0.1:1", "store", "/s", "member_ttl", "2", "lease_ttl", "3")
	if err := c.Finish("a"); err != nil {
		t.Fatal(err)
	}
	if c.MemberTTL != 2*time.Second || c.LeaseTTL != 3*time.Second {
		t.Fatalf("TTLs %v %v, want 2s 3s", c.MemberTTL, c.LeaseTTL)
	}
}

func TestConfigIssueExample(t *testing.T) {
	c := set(t, "nodes", "a@10.0.0.1:6222, b@10.0.1.1:6222, c@10.0.2.1:6222",
		"vantages", "3", "quorum", "all", "store", "/var/lib/qualifyd/cluster", "insecure_routes", "yes")
	if err := c.Finish("b"); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Nodes: []Node{{"a", "10.0.0.1:6222"}, {"b", "10.0.1.1:6222"}, {"c", "10.0.2.1:6222"}},
		Self:  "b", Vantages: 3, Quorum: All, Store: "/var/lib/qualifyd/cluster",
		MemberTTL: 6 * time.Second, LeaseTTL: 6 * time.Second,
		Secure: Secure{Name: DefaultName([]Node{{Name: "c"}, {Name: "a"}, {Name: "b"}}), InsecureRoutes: true},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	ext := set(t, "nodes", "a,b", "nats_url", "nats://n1:4222,tls://n2:4222")
	if err := ext.Finish("a"); err != nil || ext.Nodes[1] != (Node{Name: "b"}) {
		t.Fatalf("external NATS: %+v, %v", ext, err)
	}
}

// TestConfigWarnings: two nodes (allowed) and an even vantages under
// majority are warned of; three nodes with three vantages, and an even
// vantages under all, are not.
func TestConfigWarnings(t *testing.T) {
	tests := []struct {
		opts []string
		want []string
	}{
		{[]string{"nodes", "a@127.0.0.1:1,b@127.0.0.1:2,c@127.0.0.1:3"}, nil},
		{[]string{"nodes", "a@127.0.0.1:1,b@127.0.0.1:2", "allow_two_nodes", "yes"}, []string{
			"nodes= has two nodes (allow_two_nodes=yes): the loss of either node stops every push until it is back",
			"vantages=2 is even: with quorum=majority a split of the votes (1 against 1) keeps a contact's status; an odd count decides every split"}},
		{[]string{"nodes", "a@127.0.0.1:1,b@127.0.0.1:2,c@127.0.0.1:3,d@127.0.0.1:4", "vantages", "4"}, []string{
			"vantages=4 is even: with quorum=majority a split of the votes (2 against 2) keeps a contact's status; an odd count decides every split"}},
		{[]string{"nodes", "a@127.0.0.1:1,b@127.0.0.1:2,c@127.0.0.1:3", "vantages", "2", "quorum", "all"}, nil},
	}
	for _, tt := range tests {
		c := set(t, append(tt.opts, "store", "/s")...)
		if err := c.Finish("a"); err != nil {
			t.Fatal(err)
		}
		if got := c.Warnings(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: warnings %q, want %q", tt.opts, got, tt.want)
		}
	}
}

// TestRedactURLs: a password in nats_url never reaches a printed line.
func TestRedactURLs(t *testing.T) {
	got := RedactURLs("nats://q:s3cret@n1:4222, tls://n2:4222,nats://token@n3:4222")
	want := "nats://q:xxxxx@n1:4222,tls://n2:4222,nats://xxxxx@n3:4222"
	if got != want {
		t.Fatalf("RedactURLs = %q, want %q", got, want)
	}
}

// TestConfigBooleans: the section's booleans take Asterisk's words, as
// every other section of the file does, in any case; anything else is
// refused with the other sections' error.
func TestConfigBooleans(t *testing.T) {
	words := []struct {
		value string
		want  bool
	}{
		{"yes", true}, {"true", true}, {"y", true}, {"t", true}, {"1", true}, {"on", true}, {"YES", true}, {"On", true},
		{"no", false}, {"false", false}, {"n", false}, {"f", false}, {"0", false}, {"off", false}, {"No", false},
	}
	fields := map[string]func(*Config) bool{
		"allow_two_nodes": func(c *Config) bool { return c.AllowTwoNodes },
		"insecure_routes": func(c *Config) bool { return c.InsecureRoutes },
		"insecure_nats":   func(c *Config) bool { return c.InsecureNATS },
	}
	for option, field := range fields {
		for _, w := range words {
			var c Config
			c.AllowTwoNodes, c.InsecureRoutes, c.InsecureNATS = !w.want, !w.want, !w.want
			if err := c.Set(option, w.value); err != nil || field(&c) != w.want {
				t.Errorf("%s=%s: %v, %v; want %v", option, w.value, field(&c), err, w.want)
			}
		}
		for _, bad := range []string{"maybe", "", "2", "yess"} {
			var c Config
			want := `invalid value: "` + bad + `" is not a boolean (yes or no)`
			if err := c.Set(option, bad); err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
				t.Errorf("%s=%q: %v, want %q", option, bad, err, want)
			}
		}
	}
}
