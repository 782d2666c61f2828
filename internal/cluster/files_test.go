package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsDir makes a CA and the certificates of nodes a, b and x (a name not
// in nodes=), the routes' secret, and returns the directory.
func tlsDir(t *testing.T) (string, *testCA) {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	ca.issueNow(t, "a", "b", "x")
	write(t, filepath.Join(dir, "secret"), "s3cret\n", 0o600)
	return dir, ca
}

// write writes a file with mode perm.
func write(t *testing.T, path, body string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// secureConfig is a finished configuration of node a with mutual TLS
// from dir, the options in over replacing the defaults.
func secureConfig(t *testing.T, dir string, over ...string) Config {
	t.Helper()
	opts := map[string]string{"nodes": "a@10.0.0.1:6222,b@10.0.0.2:6222,c@10.0.0.3:6222", "store": "/s",
		"tls_cert": dir + "/{node}.crt", "tls_key": dir + "/{node}.key", "tls_ca": dir + "/ca.crt", "secret_file": dir + "/secret"}
	for i := 0; i+1 < len(over); i += 2 {
		opts[over[i]] = over[i+1]
	}
	var kv []string
	for _, o := range Options {
		if v, ok := opts[o]; ok {
			kv = append(kv, o, v)
		}
	}
	c := set(t, kv...)
	if err := c.Finish("a"); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckFiles(t *testing.T) {
	dir, _ := tlsDir(t)
	c := secureConfig(t, dir)
	expiry, err := c.CheckFiles(time.Now())
	if err != nil || expiry.IsZero() || c.TLSCert != dir+"/a.crt" || c.TLSKey != dir+"/a.key" {
		t.Fatalf("CheckFiles = %v, %v; tls_cert %s, tls_key %s", expiry, err, c.TLSCert, c.TLSKey)
	}
	if err := os.Chmod(dir+"/a.key", 0o640); err != nil { // a group of its readers, as ssl-cert
		t.Fatal(err)
	}
	if _, err := c.CheckFiles(time.Now()); err != nil {
		t.Fatalf("a key of mode 0640: %v, want it read", err)
	}
	if _, err := c.CheckFiles(expiry.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "not now") {
		t.Fatalf("a second after the certificate expired: %v, want it refused", err)
	}
}

// TestCheckFilesErrors: each bad file is refused with the option that
// names it and the file.
func TestCheckFilesErrors(t *testing.T) {
	dir, ca := tlsDir(t)
	ca.issue(t, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	write(t, dir+"/open", "s3cret\n", 0o644)
	write(t, dir+"/empty", "\n", 0o600)
	write(t, dir+"/two", "s3cret\nmore\n", 0o600)
	write(t, dir+"/junk", "not a NATS file\n", 0o600)
	key, err := os.ReadFile(dir + "/a.key")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir+"/open.key", string(key), 0o644)
	write(t, dir+"/open.creds", "-----BEGIN NATS USER JWT-----\n-----BEGIN USER NKEY SEED-----\n", 0o604)
	tests := []struct {
		name   string
		over   []string
		option string
		want   string
	}{
		{"missing certificate", []string{"tls_cert", dir + "/none.crt"}, "tls_cert", "file DIR/none.crt: open: no such file or directory"},
		{"unreadable CA", []string{"tls_ca", dir}, "tls_ca", "file DIR: read: is a directory"},
		{"missing key", []string{"tls_key", dir + "/none.key"}, "tls_key", "file DIR/none.key: stat: no such file or directory"},
		{"key of another certificate", []string{"tls_key", dir + "/b.key"}, "tls_key", "file DIR/b.key: not the key of DIR/a.crt's certificate: tls: private key does not match public key"},
		{"expired certificate", []string{"tls_cert", dir + "/old.crt", "tls_key", dir + "/old.key"}, "tls_cert", "file DIR/old.crt: the certificate is valid from "},
		{"certificate of another name", []string{"tls_cert", dir + "/x.crt", "tls_key", dir + "/x.key"}, "tls_cert", `file DIR/x.crt: the certificate's subjectAltName DNS names are [x], not this node's name "a": the other nodes would refuse it`},
		{"CA file without a certificate", []string{"tls_ca", dir + "/a.key"}, "tls_ca", "file DIR/a.key: no PEM certificate in it"},
		{"certificate file without a certificate", []string{"tls_cert", dir + "/a.key"}, "tls_cert", "file DIR/a.key: no PEM certificate in it"},
		{"key others may read", []string{"tls_key", dir + "/open.key"}, "tls_key", "file DIR/open.key: mode 0644: others may read or write this private key (chmod 600 it, or 640 for a group of its readers)"},
		{"missing secret", []string{"secret_file", dir + "/none"}, "secret_file", "file DIR/none: stat: no such file or directory"},
		{"secret others may read", []string{"secret_file", dir + "/open"}, "secret_file", "file DIR/open: mode 0644: group or others may read or write it (chmod 600 it)"},
		{"empty secret", []string{"secret_file", dir + "/empty"}, "secret_file", "file DIR/empty: empty: want one line, the secret"},
		{"secret of two lines", []string{"secret_file", dir + "/two"}, "secret_file", "file DIR/two: more than one line: want one line, the secret"},
	}
	external := []struct {
		name   string
		opts   []string
		option string
		want   string
	}{
		{"missing NATS CA", []string{"nats_ca", dir + "/none"}, "nats_ca", "file DIR/none: open: no such file or directory"},
		{"NATS key of another certificate", []string{"nats_cert", dir + "/a.crt", "nats_key", dir + "/b.key"}, "nats_key", "file DIR/b.key: not the key of DIR/a.crt's certificate: tls: private key does not match public key"},
		{"NATS password others may read", []string{"nats_user", "q", "nats_password_file", dir + "/open"}, "nats_password_file", "file DIR/open: mode 0644: group or others may read or write it (chmod 600 it)"},
		{"NATS key others may read", []string{"nats_cert", dir + "/a.crt", "nats_key", dir + "/open.key"}, "nats_key", "file DIR/open.key: mode 0644: others may read or write this private key"},
		{"creds others may read", []string{"nats_creds", dir + "/open.creds"}, "nats_creds", "file DIR/open.creds: mode 0604: others may read or write this private key"},
		{"nkey seed others may read", []string{"nats_nkey", dir + "/open"}, "nats_nkey", "file DIR/open: mode 0644: others may read or write this private key"},
		{"not a creds file", []string{"nats_creds", dir + "/junk"}, "nats_creds", `file DIR/junk: no "BEGIN NATS USER JWT" in it: want a NATS .creds file (nsc generate creds)`},
		{"not an nkey seed", []string{"nats_nkey", dir + "/junk"}, "nats_nkey", "file DIR/junk: "},
	}
	check := func(t *testing.T, c Config, option, want string) {
		t.Helper()
		_, err := c.CheckFiles(time.Now())
		fe, ok := errors.AsType[*FileError](err)
		want = strings.ReplaceAll(want, "DIR", dir)
		if !ok || fe.Option != option || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("CheckFiles = %v, want a FileError of %s starting %q", err, option, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, secureConfig(t, dir, tt.over...), tt.option, tt.want) })
	}
	for _, tt := range external {
		t.Run(tt.name, func(t *testing.T) {
			c := set(t, append([]string{"nodes", "a,b,c", "nats_url", "tls://n:4222"}, tt.opts...)...)
			if err := c.Finish("a"); err != nil {
				t.Fatal(err)
			}
			check(t, c, tt.option, tt.want)
		})
	}
}
