package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/peertest"
)

// serveTLS answers each request on TLS connections to a loopback
// listener with answer's response until the test ends, and returns its
// address. A request is read up to its blank line: OPTIONS carry no body.
func serveTLS(t *testing.T, cfg *tls.Config, answer func(msg string) string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go serveTLSConn(c, answer)
		}
	}()
	return ln.Addr().String()
}

func serveTLSConn(c net.Conn, answer func(msg string) string) {
	r := bufio.NewReader(c)
	for {
		var msg strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			msg.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		if resp := answer(msg.String()); resp != "" {
			if _, err := c.Write([]byte(resp)); err != nil {
				return
			}
		}
	}
}

// TestDaemonTrustsTheTransportsCA: a TLS trunk whose SBC has a
// certificate of a private CA is Reachable through a transport whose
// ca_list_file is that CA, with verify_server=yes, and through one with
// Asterisk's default verify_server=no; it is not through a transport
// that verifies against no CA list, as Asterisk's qualify fails too.
func TestDaemonTrustsTheTransportsCA(t *testing.T) {
	c := peertest.WriteCerts(t)
	pair, err := tls.LoadX509KeyPair(c.ServerCert, c.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	peer := &sipPeer{}
	addr := serveTLS(t, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS10}, peer.answer)
	var b strings.Builder
	b.WriteString("[private]\ntype=transport\nprotocol=tls\nca_list_file=" + c.CA + "\nverify_server=yes\nmethod=tlsv1_2\n\n")
	b.WriteString("[default]\ntype=transport\nprotocol=tls\n\n")
	b.WriteString("[strict]\ntype=transport\nprotocol=tls\nverify_server=yes\nmethod=sslv23\n\n")
	for _, tr := range []string{"private", "default", "strict"} {
		fmt.Fprintf(&b, "[%s-sbc]\ntype=aor\ncontact=sip:sbc@%s;transport=tls\nqualify_frequency=1\nqualify_timeout=1\n"+
			"[%s-sbc]\ntype=endpoint\naors=%s-sbc\ntransport=%s\n\n", tr, addr, tr, tr, tr)
	}
	conf := filepath.Join(t.TempDir(), "pjsip.conf")
	writeFile(t, conf, b.String())
	d := startDaemon(t, "--config", conf, "--http", "", "--sip-bind", "127.0.0.1:0")
	// The three first verdicts come in any order.
	got := map[string]string{}
	for range 3 {
		line := d.expect("-sbc/sip:sbc@" + addr + " is now ")
		_, contact, _ := strings.Cut(line, "Contact ")
		aor, _, _ := strings.Cut(contact, "/")
		_, status, _ := strings.Cut(contact, " is now ")
		got[aor], _, _ = strings.Cut(status, ".")
	}
	want := map[string]string{"private-sbc": "Reachable", "default-sbc": "Reachable", "strict-sbc": "Unreachable"}
	if !maps.Equal(got, want) {
		t.Fatalf("first verdicts %v, want %v", got, want)
	}
}
