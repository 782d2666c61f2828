package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// TestCheckConfigPrintsTLSTrust: check-config prints what a probe through
// each TLS transport trusts, Asterisk's defaults included, and warns of
// a transport through which no probe can succeed.
func TestCheckConfigPrintsTLSTrust(t *testing.T) {
	c := peertest.WriteCerts(t)
	conf := "[default]\ntype=transport\nprotocol=tls\n\n" +
		"[private]\ntype=transport\nprotocol=tls\nca_list_file=" + c.CA + "\nverify_server=yes\ncert_file=" + c.ClientCert +
		"\npriv_key_file=" + c.ClientKey + "\nmethod=tlsv1_2\n\n" +
		"[nothing]\ntype=transport\nprotocol=tls\nverify_server=yes\nmethod=sslv23\n\n" +
		"[sbc]\ntype=aor\ncontact=sips:sbc@192.0.2.1\n[sbc]\ntype=endpoint\naors=sbc\ntransport=private\n"
	file := filepath.Join(writeConfig(t, map[string]string{"pjsip.conf": conf}), "pjsip.conf")
	code, stdout, stderr := checkConfig(file)
	want := []string{
		"TLS transport default: server certificates are not verified (verify_server=no, Asterisk's default); client certificate none; TLS 1.0 only (method unset, pjproject's default)\n",
		"TLS transport private: server certificates verified against ca_list_file " + c.CA + ", name by subjectAltName or common name, no wildcard; client certificate " + c.ClientCert + "; TLS 1.2 only (method=tlsv1_2)\n",
		"TLS transport nothing: server certificates verified against no CA (no ca_list_file or ca_list_path), name by subjectAltName or common name, no wildcard; client certificate none; TLS 1.0 to TLS 1.3 (method=sslv23)\n",
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	warn := "qualifyd check-config: warning: TLS transport nothing: verify_server=yes without ca_list_file or ca_list_path trusts no server certificate: every probe through it fails, as Asterisk's do\n"
	if code != 0 || stderr != warn {
		t.Fatalf("exit %d, stderr\n got: %q\nwant: %q", code, stderr, warn)
	}
}

// TestCheckConfigRefusesBadTLSTransportFile: a transport's CA file
// without a certificate fails check-config at the option's line.
func TestCheckConfigRefusesBadTLSTransportFile(t *testing.T) {
	c := peertest.WriteCerts(t)
	conf := "[t]\ntype=transport\nprotocol=tls\nca_list_file=" + c.ClientKey + "\n"
	file := filepath.Join(writeConfig(t, map[string]string{"pjsip.conf": conf}), "pjsip.conf")
	code, stdout, stderr := checkConfig(file)
	want := "qualifyd check-config: " + file + `:4: section "t": option "ca_list_file": invalid value: file ` + c.ClientKey + ": no PEM certificate in it\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q, stderr\n got: %q\nwant: %q", code, stdout, stderr, want)
	}
}
