package cluster

import (
	"errors"
	"testing"
	"time"
)

func TestSecureSetErrors(t *testing.T) {
	tests := []struct{ option, value, want string }{
		{"name", "a b", `invalid value: "a b": a node's name has only letters, digits, '-' and '_'`},
		{"insecure_routes", "sure", `invalid value: "sure" is not a boolean (yes or no)`},
		{"tls_cert", "", "invalid value: empty"},
		{"secret_file", "", "invalid value: empty"},
		{"nats_user", "", "invalid value: empty"},
	}
	for _, tt := range tests {
		var c Config
		if err := c.Set(tt.option, tt.value); err == nil || err.Error() != tt.want || !errors.Is(err, ErrValue) {
			t.Errorf("Set(%q, %q) = %v, want %q", tt.option, tt.value, err, tt.want)
		}
	}
}

// TestSecureFinishErrors: plain routes off loopback, TLS options in part
// and options of the other NATS are refused.
func TestSecureFinishErrors(t *testing.T) {
	off := "a@127.0.0.1:6222,b@10.0.0.2:6222,c@127.0.0.1:6223"
	tests := []struct {
		name string
		opts []string
		want string
	}{
		{"plain routes off loopback", []string{"nodes", off, "store", "/s"},
			`invalid value: node "b" routes on 10.0.0.2:6222: routes off loopback need tls_cert, tls_key and tls_ca (or insecure_routes=yes)`},
		{"a host name is off loopback", []string{"nodes", "a@localhost:1,b@qualifyd-b:1,c@localhost:2", "store", "/s"},
			`invalid value: node "b" routes on qualifyd-b:1: routes off loopback need tls_cert, tls_key and tls_ca (or insecure_routes=yes)`},
		{"no CA", []string{"nodes", off, "store", "/s", "tls_cert", "c", "tls_key", "k"}, "invalid value: tls_cert, tls_key and tls_ca go together"},
		{"nats_ options embedded", []string{"nodes", off, "store", "/s", "insecure_routes", "yes", "nats_ca", "/ca"},
			"invalid value: the nats_ options are for an external NATS (nats_url=); the embedded server's routes use tls_cert, tls_key, tls_ca and secret_file"},
		{"route options external", []string{"nodes", "a,b,c", "nats_url", "nats://n:4222", "tls_ca", "/ca"},
			"invalid value: name, tls_cert, tls_key, tls_ca, secret_file and insecure_routes are the embedded server's; with nats_url= use nats_ca, nats_cert, nats_key and the nats_ credentials"},
		{"NATS certificate without key", []string{"nodes", "a,b,c", "nats_url", "nats://n:4222", "nats_cert", "/c"}, "invalid value: nats_cert and nats_key go together"},
		{"NATS user without password", []string{"nodes", "a,b,c", "nats_url", "nats://n:4222", "nats_user", "q"}, "invalid value: nats_user and nats_password_file go together"},
		{"two credentials", []string{"nodes", "a,b,c", "nats_url", "nats://n:4222", "nats_creds", "/c", "nats_nkey", "/n"},
			"invalid value: nats_creds, nats_nkey and nats_user are three ways to authenticate: choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := set(t, tt.opts...)
			if err := c.Finish("a"); err == nil || err.Error() != tt.want || !errors.Is(err, ErrValue) {
				t.Fatalf("Finish = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestSecureDefaults: loopback routes need no TLS; the name is derived
// from the nodes' names whatever their order, unless given; {node} is
// replaced.
func TestSecureDefaults(t *testing.T) {
	c := set(t, "nodes", "a@127.0.0.1:1,b@[::1]:2,c@localhost:3", "store", "/s")
	if err := c.Finish("b"); err != nil || c.RouteTLS() {
		t.Fatalf("loopback routes: %v, TLS %v", err, c.RouteTLS())
	}
	d := set(t, "nodes", "c@127.0.0.1:3,a@127.0.0.1:1,b@127.0.0.1:2", "store", "/s")
	e := set(t, "nodes", "a@127.0.0.1:1,b@127.0.0.1:2,d@127.0.0.1:3", "store", "/s")
	if d.Finish("a") != nil || e.Finish("a") != nil || c.Name != d.Name || c.Name == e.Name {
		t.Fatalf("names %q %q %q: want the first two equal, the third apart", c.Name, d.Name, e.Name)
	}
	f := set(t, "nodes", "a@10.0.0.1:1,b@10.0.0.2:1,c@10.0.0.3:1", "store", "/s", "name", "west",
		"tls_cert", "/t/{node}.crt", "tls_key", "/t/{node}.key", "tls_ca", "/t/ca.crt")
	if err := f.Finish("b"); err != nil || f.Name != "west" || f.TLSCert != "/t/b.crt" || f.TLSKey != "/t/b.key" || !f.RouteTLS() {
		t.Fatalf("%+v, %v", f.Secure, err)
	}
}

// FuzzConfig: any option and value, then Finish and CheckFiles, give an
// error or a configuration, never a panic; an accepted embedded one
// without TLS has its routes on loopback or insecure_routes=yes.
func FuzzConfig(f *testing.F) {
	f.Add("nodes", "a@127.0.0.1:1,b@10.0.0.2:2", "tls_cert", "/x/{node}.crt")
	f.Add("nodes", "a,b,c", "nats_url", "tls://n:4222")
	f.Add("insecure_routes", "yes", "name", "west")
	f.Fuzz(func(t *testing.T, o1, v1, o2, v2 string) {
		var c Config
		_ = c.Set("store", "/s")
		if c.Set(o1, v1) != nil || c.Set(o2, v2) != nil || c.Finish("a") != nil {
			return
		}
		_, _ = c.CheckFiles(time.Now())
		if c.NATSURL == "" && !c.RouteTLS() && !c.InsecureRoutes {
			for _, n := range c.Nodes {
				if !loopback(n.Route) {
					t.Fatalf("accepted %+v: a route off loopback in clear", c)
				}
			}
		}
	})
}

// TestClearSecretToNATS: a password or token to an external NATS off
// loopback over nats:// or ws:// (in the URL, or nats_password_file's) is
// refused without nats_ca (which makes the client speak TLS), unless
// insecure_nats=yes; on loopback, over tls:// or wss://, or with a
// .creds file (a signature, no secret on the wire) it is accepted.
func TestClearSecretToNATS(t *testing.T) {
	const refusal = ": a password or token to a NATS off loopback would cross the network in clear: set nats_ca (the client then speaks TLS), use tls://, or set insecure_nats=yes"
	for _, tc := range []struct {
		name string
		opts []string
		want string // "": accepted
	}{
		{"password in the URL", []string{"nats_url", "nats://q:s3cret@nats.example.net:4222"}, `invalid value: "nats://q:xxxxx@nats.example.net:4222"` + refusal},
		{"token in the URL", []string{"nats_url", "nats://s3cret@10.0.0.9:4222"}, `invalid value: "nats://xxxxx@10.0.0.9:4222"` + refusal},
		{"one URL of two", []string{"nats_url", "nats://127.0.0.1:4222, ws://q:s3cret@n2:80"}, `invalid value: "ws://q:xxxxx@n2:80"` + refusal},
		{"password file", []string{"nats_url", "nats://n:4222", "nats_user", "q", "nats_password_file", "/p"}, `invalid value: "nats://n:4222"` + refusal},
		{"no port", []string{"nats_url", "nats://q:s3cret@n"}, `invalid value: "nats://q:xxxxx@n"` + refusal},
		{"insecure_nats embedded", []string{"nodes", "a@127.0.0.1:6222", "store", "/s", "insecure_nats", "yes"},
			"invalid value: insecure_nats is for an external NATS (nats_url=)"},
		{"loopback", []string{"nats_url", "nats://q:s3cret@127.0.0.1:4222,nats://q:s3cret@localhost:4223,nats://q:s3cret@[::1]:4224"}, ""},
		{"tls://", []string{"nats_url", "tls://q:s3cret@n:4222,wss://q:s3cret@n:443"}, ""},
		{"nats_ca", []string{"nats_url", "nats://q:s3cret@n:4222", "nats_ca", "/ca"}, ""},
		{"insecure_nats", []string{"nats_url", "nats://q:s3cret@n:4222", "insecure_nats", "yes"}, ""},
		{"insecure_nats=no", []string{"nats_url", "nats://q:s3cret@n:4222", "insecure_nats", "no"}, `invalid value: "nats://q:xxxxx@n:4222"` + refusal},
		{"no secret", []string{"nats_url", "nats://n:4222"}, ""},
		{"creds", []string{"nats_url", "nats://n:4222", "nats_creds", "/c"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts[0] != "nodes" {
				opts = append([]string{"nodes", "a,b,c"}, opts...)
			}
			c := set(t, opts...)
			err := c.Finish("a")
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrValue)) {
				t.Fatalf("Finish = %v, want %q", err, tc.want)
			}
		})
	}
}
