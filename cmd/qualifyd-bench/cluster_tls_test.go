package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestClusterModes(t *testing.T) {
	for _, tt := range []struct {
		mode   string
		rounds int
		want   []bool
	}{{"off", 3, []bool{false}}, {"on", 1, []bool{true}}, {"alternate", 2, []bool{false, true, false, true}}} {
		if got, err := clusterModes(tt.mode, tt.rounds); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s x%d: %v, %v; want %v", tt.mode, tt.rounds, got, err, tt.want)
		}
	}
	if _, err := clusterModes("yes", 1); err == nil {
		t.Error("--tls yes accepted")
	}
}

// TestTLSRatios: the ratio is of the means of the runs on over off.
func TestTLSRatios(t *testing.T) {
	run := func(tls bool, cpu, p50 float64) clusterRunReport {
		return clusterRunReport{TLS: tls, Nodes: []clusterNodeCost{{Cost: daemonReport{CPUUsPerProbe: cpu, RSSPerContact: 100}}, {Cost: daemonReport{CPUUsPerProbe: cpu, RSSPerContact: 100}}},
			Flip: flipReport{P50Ms: p50, P99Ms: 10}, Failover: failoverReport{LeaderS: 2}}
	}
	if r := tlsRatios([]clusterRunReport{run(false, 10, 5)}); r != nil {
		t.Fatalf("one mode only: %+v, want none", r)
	}
	r := tlsRatios([]clusterRunReport{run(false, 10, 5), run(true, 11, 6), run(false, 10, 5), run(true, 13, 4)})
	if r == nil || r.CPUPerProbe != 1.2 || r.RSSPerContact != 1 || r.FlipP50 != 1 || r.FlipP99 != 1 || r.NewLeader != 1 {
		t.Fatalf("%+v, want CPU 1.2 and the rest 1", r)
	}
}

// TestMakeCerts: the bench's certificates chain to its CA and carry the
// nodes' names; the secret is its owner's only.
func TestMakeCerts(t *testing.T) {
	dir := t.TempDir()
	if err := makeCerts(dir, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "b.crt"), filepath.Join(dir, "b.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "b", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "secret")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret: %v, %v", st, err)
	}
}
