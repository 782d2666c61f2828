package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsConf is a file of three nodes off loopback with the routes' TLS
// options of dir, each option on the line the tests name: tls_cert 7,
// tls_key 8, tls_ca 9, secret_file 10.
func tlsConf(dir string, over map[string]string) string {
	opts := map[string]string{"tls_cert": dir + "/{node}.crt", "tls_key": dir + "/{node}.key", "tls_ca": dir + "/ca.crt", "secret_file": dir + "/secret"}
	for k, v := range over {
		opts[k] = v
	}
	var b strings.Builder
	b.WriteString("[t]\ntype=aor\ncontact=sip:192.0.2.1\n\n[c]\ntype=cluster\n")
	for _, k := range []string{"tls_cert", "tls_key", "tls_ca", "secret_file"} {
		b.WriteString(k + "=" + opts[k] + "\n")
	}
	b.WriteString("nodes=a@10.0.0.1:6222,b@10.0.1.1:6222,c@10.0.2.1:6222\nstore=/var/lib/qualifyd/cluster\n")
	return b.String()
}

func TestCheckConfigPrintsTLSRoutes(t *testing.T) {
	dir := readmeCertificates(t, "a", "b", "c")
	file := filepath.Join(writeConfig(t, map[string]string{"q.conf": tlsConf(dir, nil)}), "q.conf")
	code, stdout, stderr := checkConfig(file)
	want := "NATS embedded, store /var/lib/qualifyd/cluster, name qualifyd-205830ca, routes mutual TLS with secret_file, member_ttl 6s"
	if code != 0 || stderr != "" || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant it to hold %q", code, stderr, stdout, want)
	}
}

// TestCheckConfigRefusesPlainRoutesOffLoopback: routes off loopback
// without TLS are refused at the section's line, unless
// insecure_routes=yes.
func TestCheckConfigRefusesPlainRoutesOffLoopback(t *testing.T) {
	conf := "[t]\ntype=aor\ncontact=sip:192.0.2.1\n\n[c]\ntype=cluster\nnodes=a@127.0.0.1:6222,b@192.0.2.7:6222,c@127.0.0.1:6223\nstore=/s\n"
	file := filepath.Join(writeConfig(t, map[string]string{"q.conf": conf}), "q.conf")
	code, stdout, stderr := checkConfig(file)
	want := "qualifyd check-config: " + file + `:5: section "c": invalid value: node "b" routes on 192.0.2.7:6222: routes off loopback need tls_cert, tls_key and tls_ca (or insecure_routes=yes)` + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q, stderr\n got: %q\nwant: %q", code, stdout, stderr, want)
	}
	file = filepath.Join(writeConfig(t, map[string]string{"q.conf": conf + "insecure_routes=yes\n"}), "q.conf")
	if code, stdout, stderr := checkConfig(file); code != 0 || !strings.Contains(stdout, "routes in clear (insecure_routes=yes)") {
		t.Fatalf("with insecure_routes=yes: exit %d, stderr %q, stdout %s", code, stderr, stdout)
	}
}

// badTLSFiles are the bad files of the routes' options, each with the
// line of its option and the start of the error, the directory as DIR.
func badTLSFiles(t *testing.T, dir string) []struct{ name, option, value, want string } {
	t.Helper()
	if err := os.WriteFile(dir+"/open", []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []struct{ name, option, value, want string }{
		{"missing certificate", "tls_cert", "DIR/none.crt", `:7: section "c": option "tls_cert": invalid value: file DIR/none.crt: open: no such file or directory`},
		{"key of another node", "tls_key", "DIR/b.key", `:8: section "c": option "tls_key": invalid value: file DIR/b.key: not the key of DIR/a.crt's certificate: tls: private key does not match public key`},
		{"CA file without a certificate", "tls_ca", "DIR/a.key", `:9: section "c": option "tls_ca": invalid value: file DIR/a.key: no PEM certificate in it`},
		{"secret others may read", "secret_file", "DIR/open", `:10: section "c": option "secret_file": invalid value: file DIR/open: mode 0644: group or others may read or write it (chmod 600 it)`},
	}
}

// TestCheckConfigRefusesBadTLSFiles: each bad file is refused at its
// option's line, naming the file.
func TestCheckConfigRefusesBadTLSFiles(t *testing.T) {
	dir := readmeCertificates(t, "a", "b", "c")
	for _, tt := range badTLSFiles(t, dir) {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(writeConfig(t, map[string]string{"q.conf": tlsConf(dir, map[string]string{tt.option: strings.ReplaceAll(tt.value, "DIR", dir)})}), "q.conf")
			code, stdout, stderr := checkConfig(file)
			want := "qualifyd check-config: " + file + strings.ReplaceAll(tt.want, "DIR", dir) + "\n"
			if code != 1 || stdout != "" || stderr != want {
				t.Fatalf("exit %d, stdout %q, stderr\n got: %q\nwant: %q", code, stdout, stderr, want)
			}
		})
	}
}

// TestRunRefusesBadTLSFiles: `qualifyd run` refuses the same files at
// the same lines before it starts anything: no cluster line, no route.
func TestRunRefusesBadTLSFiles(t *testing.T) {
	dir := readmeCertificates(t, "a", "b", "c")
	for _, tt := range badTLSFiles(t, dir) {
		t.Run(tt.name, func(t *testing.T) {
			conf := strings.ReplaceAll(tlsConf(dir, map[string]string{tt.option: strings.ReplaceAll(tt.value, "DIR", dir)}), "10.0.0.1:6222", "127.0.0.1:1")
			file := filepath.Join(t.TempDir(), "q.conf")
			writeFile(t, file, conf)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, binary, "run", "--config", file, "--node", "a", "--http", "").CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want 1; output %s", err, out)
			}
			if want := file + strings.ReplaceAll(tt.want, "DIR", dir); !strings.Contains(string(out), want) || strings.Contains(string(out), "cluster:") {
				t.Fatalf("output:\n%s\nwant it to hold %q and no cluster line", out, want)
			}
		})
	}
}

// TestCheckConfigReadsThisHostsFiles: on a host that runs one of nodes=
// (its short host name), check-config reads that node's {node} files, so
// a host that holds only its own certificate passes.
func TestCheckConfigReadsThisHostsFiles(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	dir := readmeCertificates(t, host)
	conf := strings.Replace(tlsConf(dir, nil), "b@10.0.1.1:6222", host+"@10.0.1.1:6222", 1)
	file := filepath.Join(writeConfig(t, map[string]string{"q.conf": conf}), "q.conf")
	if code, stdout, stderr := checkConfig(file); code != 0 || stderr != "" {
		t.Fatalf("host %s holding only its own certificate: exit %d, stderr %q, stdout:\n%s", host, code, stderr, stdout)
	}
}
