package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// clusterRunReport is one run of the cluster: its routes in clear on
// loopback, or with mutual TLS and the secret.
type clusterRunReport struct {
	TLS      bool              `json:"tls"`
	QuietS   float64           `json:"quiet_s"`
	Nodes    []clusterNodeCost `json:"nodes"`
	Flip     flipReport        `json:"flip"`
	Failover failoverReport    `json:"failover"`
}

// tlsRatio is the means of the TLS runs over those of the runs in clear:
// the nodes' CPU per probe and RSS per contact, the flip's p50 and p99,
// the failover's new leader.
type tlsRatio struct {
	CPUPerProbe   float64 `json:"cpu_per_probe"`
	RSSPerContact float64 `json:"rss_per_contact"`
	FlipP50       float64 `json:"flip_p50"`
	FlipP99       float64 `json:"flip_p99"`
	NewLeader     float64 `json:"new_leader"`
}

// clusterModes are the cluster runs of --tls: off (routes in clear),
// on, or alternate (off, on, repeated --rounds times).
func clusterModes(mode string, rounds int) ([]bool, error) {
	switch mode {
	case "off":
		return []bool{false}, nil
	case "on":
		return []bool{true}, nil
	case "alternate":
		var out []bool
		for range max(rounds, 1) {
			out = append(out, false, true)
		}
		return out, nil
	}
	return nil, fmt.Errorf("--tls %q: want off, on or alternate", mode)
}

// clusterAs is the cluster step with its routes in clear or with TLS;
// it records the run.
func (r *clusterRun) clusterAs(tls bool) func(context.Context) error {
	return func(ctx context.Context) error {
		r.tls, r.run = tls, r.run+1
		r.hook.reset()
		if err := r.cluster(ctx); err != nil {
			return err
		}
		r.rep.Runs = append(r.rep.Runs, clusterRunReport{TLS: tls, QuietS: r.rep.QuietS, Nodes: r.rep.Nodes, Flip: r.rep.Flip, Failover: r.rep.Failover})
		return nil
	}
}

// tlsOptions are the cluster section's TLS options of the run: none in
// clear, else the files of certificates made once per benchmark.
func (r *clusterRun) tlsOptions() (string, error) {
	if !r.tls {
		return "", nil
	}
	dir := filepath.Join(r.dir, "tls")
	if _, err := os.Stat(filepath.Join(dir, "secret")); err != nil {
		if err := makeCerts(dir, clusterNodes); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("tls_cert=%s/{node}.crt\ntls_key=%s/{node}.key\ntls_ca=%s/ca.crt\nsecret_file=%s/secret\n", dir, dir, dir, dir), nil
}

// makeCerts writes a CA, a certificate and key per node (its name as
// subjectAltName DNS name) and the routes' secret to dir.
func makeCerts(dir string, names []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEMFile(filepath.Join(dir, "ca.crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	for i, name := range names {
		if err := makeNodeCert(dir, name, int64(i+2), ca, caKey); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "secret"), []byte(rand.Text()+"\n"), 0o600)
}

// makeNodeCert writes dir/name.crt and dir/name.key, signed by ca.
func makeNodeCert(dir, name string, serial int64, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: ca.NotBefore, NotAfter: ca.NotAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEMFile(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEMFile(filepath.Join(dir, name+".key"), "PRIVATE KEY", kder)
}

// writePEMFile writes one PEM block, mode 0600.
func writePEMFile(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// tlsRatios is the TLS runs' means over the runs' in clear; nil unless
// both ran.
func tlsRatios(runs []clusterRunReport) *tlsRatio {
	var on, off [5]float64
	var non, noff float64
	for _, run := range runs {
		m := runMeans(run)
		sum, n := &off, &noff
		if run.TLS {
			sum, n = &on, &non
		}
		for i := range m {
			sum[i] += m[i]
		}
		*n++
	}
	if non == 0 || noff == 0 {
		return nil
	}
	r := func(i int) float64 { return (on[i] / non) / (off[i] / noff) }
	return &tlsRatio{CPUPerProbe: r(0), RSSPerContact: r(1), FlipP50: r(2), FlipP99: r(3), NewLeader: r(4)}
}

// runMeans are a run's nodes' mean CPU per probe and RSS per contact,
// its flip's p50 and p99 and its new leader's time.
func runMeans(run clusterRunReport) [5]float64 {
	var cpu, rss float64
	for _, n := range run.Nodes {
		cpu += n.Cost.CPUUsPerProbe / float64(len(run.Nodes))
		rss += n.Cost.RSSPerContact / float64(len(run.Nodes))
	}
	return [5]float64{cpu, rss, run.Flip.P50Ms, run.Flip.P99Ms, run.Failover.LeaderS}
}

// printTLSRuns prints a line per cluster run and the ratio of TLS on to
// off, when both ran.
func printTLSRuns(w io.Writer, r clusterReport) {
	if len(r.Runs) < 2 {
		return
	}
	fmt.Fprintln(w, "\nruns, alternated: routes in clear on loopback (off) and with mutual TLS and the secret (on)")
	fmt.Fprintln(w, "\n| run | routes | CPU per probe (mean of nodes) | RSS per contact (mean) | flip p50 | flip p99 | new leader |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
	for i, run := range r.Runs {
		m := runMeans(run)
		mode := "off"
		if run.TLS {
			mode = "on"
		}
		fmt.Fprintf(w, "| %d | %s | %.2f us | %.0f B | %.0f ms | %.0f ms | %.2f s |\n", i+1, mode, m[0], m[1], m[2], m[3], m[4])
	}
	if t := r.TLS; t != nil {
		fmt.Fprintf(w, "\nTLS on / off (means): CPU per probe %.3f, RSS per contact %.3f, flip p50 %.2f, flip p99 %.2f, new leader %.2f\n",
			t.CPUPerProbe, t.RSSPerContact, t.FlipP50, t.FlipP99, t.NewLeader)
	}
}
