package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// FileError is a file an option of the section names that cannot serve:
// missing, unreadable, or not what the option wants. The daemon places
// it at the option's line.
type FileError struct {
	// Option is the option that names the file.
	Option string
	// File is the file's path.
	File string
	// Err is the cause.
	Err error
}

// Error is "file PATH: cause".
func (e *FileError) Error() string { return fmt.Sprintf("file %s: %v", e.File, e.Err) }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// fileErr is the FileError of option's file, with an *fs.PathError's
// path left out (the FileError names it).
func fileErr(option, file string, err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return &FileError{Option: option, File: file, Err: err}
}

// files is what the options' files hold, read at start and again at each
// reload; the TLS callbacks take the latest.
type files struct {
	cert   *tls.Certificate // the node's (tls_cert or nats_cert), Leaf set; nil for none
	pool   *x509.CertPool   // tls_ca or nats_ca; nil for none
	secret string           // secret_file's or nats_password_file's line
}

// Expiry is when the node's certificate expires, zero without one.
func (f *files) Expiry() time.Time {
	if f.cert == nil {
		return time.Time{}
	}
	return f.cert.Leaf.NotAfter
}

// CheckFiles reads every file the options name, as New and each reload
// do, and returns when the node's certificate expires (zero without
// one). Its error is a *FileError. Call it after Finish.
func (c *Config) CheckFiles(now time.Time) (time.Time, error) {
	f, err := c.readFiles(now)
	if err != nil {
		return time.Time{}, err
	}
	return f.Expiry(), nil
}

// readFiles reads the files of the NATS chosen.
func (c *Config) readFiles(now time.Time) (*files, error) {
	if c.NATSURL != "" {
		return c.readExternal(now)
	}
	f := &files{}
	var err error
	if c.RouteTLS() {
		if f.cert, err = readPair("tls_cert", c.TLSCert, "tls_key", c.TLSKey, now); err != nil {
			return nil, err
		}
		if !slices.Contains(f.cert.Leaf.DNSNames, c.Self) {
			return nil, &FileError{Option: "tls_cert", File: c.TLSCert, Err: fmt.Errorf("the certificate's subjectAltName DNS names are %v, not this node's name %q: the other nodes would refuse it", f.cert.Leaf.DNSNames, c.Self)}
		}
		if f.pool, err = readCA("tls_ca", c.TLSCA); err != nil {
			return nil, err
		}
	}
	if c.SecretFile != "" {
		f.secret, err = readSecret("secret_file", c.SecretFile)
	}
	return f, err
}

// readExternal reads the files of an external NATS's options.
func (c *Config) readExternal(now time.Time) (*files, error) {
	f := &files{}
	var err error
	if c.NATSCert != "" {
		if f.cert, err = readPair("nats_cert", c.NATSCert, "nats_key", c.NATSKey, now); err != nil {
			return nil, err
		}
	}
	if c.NATSCA != "" {
		if f.pool, err = readCA("nats_ca", c.NATSCA); err != nil {
			return nil, err
		}
	}
	switch {
	case c.NATSPasswordFile != "":
		f.secret, err = readSecret("nats_password_file", c.NATSPasswordFile)
	case c.NATSNkey != "":
		if err = keyMode("nats_nkey", c.NATSNkey); err != nil {
			break
		}
		if _, err = nats.NkeyOptionFromSeed(c.NATSNkey); err != nil {
			err = fileErr("nats_nkey", c.NATSNkey, err)
		}
	case c.NATSCreds != "":
		err = checkCreds(c.NATSCreds)
	}
	return f, err
}

// readPair reads a certificate and its key, and checks that they match
// and that the certificate is valid at now.
func readPair(certOpt, certFile, keyOpt, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fileErr(certOpt, certFile, err)
	}
	leaf, err := firstCert(certPEM)
	if err != nil {
		return nil, fileErr(certOpt, certFile, err)
	}
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return nil, fileErr(certOpt, certFile, fmt.Errorf("the certificate is valid from %s to %s, not now",
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	if err := keyMode(keyOpt, keyFile); err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fileErr(keyOpt, keyFile, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fileErr(keyOpt, keyFile, fmt.Errorf("not the key of %s's certificate: %w", certFile, err))
	}
	pair.Leaf = leaf
	return &pair, nil
}

// firstCert parses the first certificate of a PEM file.
func firstCert(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return nil, errors.New("no PEM certificate in it")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// readCA reads a pool of PEM certificates, at least one.
func readCA(option, file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fileErr(option, file, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fileErr(option, file, errors.New("no PEM certificate in it"))
	}
	return pool, nil
}

// keyMode refuses a private key (a TLS key, an nkey seed, a .creds
// file) that others may read or write; its group may read it, as
// Debian's ssl-cert group reads /etc/ssl/private.
func keyMode(option, file string) error {
	return fileMode(option, file, 0o007, "others may read or write this private key (chmod 600 it, or 640 for a group of its readers)")
}

// fileMode refuses file when any bit of forbidden is set in its mode,
// saying why.
func fileMode(option, file string, forbidden fs.FileMode, why string) error {
	st, err := os.Stat(file)
	if err != nil {
		return fileErr(option, file, err)
	}
	if perm := st.Mode().Perm(); perm&forbidden != 0 {
		return fileErr(option, file, fmt.Errorf("mode %04o: %s", perm, why))
	}
	return nil
}

// readSecret reads a one-line secret from a file only its owner may
// read.
func readSecret(option, file string) (string, error) {
	if err := fileMode(option, file, 0o077, "group or others may read or write it (chmod 600 it)"); err != nil {
		return "", err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fileErr(option, file, err)
	}
	line := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	switch {
	case strings.TrimSpace(line) == "":
		return "", fileErr(option, file, errors.New("empty: want one line, the secret"))
	case strings.ContainsAny(line, "\r\n"):
		return "", fileErr(option, file, errors.New("more than one line: want one line, the secret"))
	}
	return line, nil
}

// checkCreds checks that a .creds file holds a user JWT and a seed.
func checkCreds(file string) error {
	if err := keyMode("nats_creds", file); err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fileErr("nats_creds", file, err)
	}
	for _, want := range []string{"-----BEGIN NATS USER JWT-----", "-----BEGIN USER NKEY SEED-----"} {
		if !strings.Contains(string(data), want) {
			return fileErr("nats_creds", file, fmt.Errorf("no %q in it: want a NATS .creds file (nsc generate creds)", strings.Trim(want, "-")))
		}
	}
	return nil
}
