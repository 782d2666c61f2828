package pjsip

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// ErrUnreadable is a transport's priv_key_file that qualifyd may not
// read (a warning, Config.Warnings): Asterisk keeps its keys to itself,
// and a qualifyd outside its group presents no client certificate.
var ErrUnreadable = errors.New("cannot read")

// tlsDef is a TLS transport's options that shape the connections
// Asterisk opens through it, each the last of its name, with its place
// for errors; an unset one is the zero variable. Its files are read once
// the transports Asterisk would load are known (builder.buildTLS).
type tlsDef struct {
	settings                                 probe.TLSSettings
	caFile, caPath, certFile, keyFile, passw variable
	minVersion, maxVersion                   uint16
}

// tlsMethods are method's values, as Asterisk's
// transport_tls_method_handler reads them, and the TLS versions each
// allows with the bundled pjproject: Asterisk sets no protocol mask, so
// ssl_get_proto turns the method into one protocol and OpenSSL is told
// to speak no other; "default" and "unspecified" are
// PJSIP_SSL_DEFAULT_METHOD, tlsv1, and only sslv23 allows them all.
var tlsMethods = map[string][2]uint16{
	"":            {tls.VersionTLS10, tls.VersionTLS10},
	"default":     {tls.VersionTLS10, tls.VersionTLS10},
	"unspecified": {tls.VersionTLS10, tls.VersionTLS10},
	"tlsv1":       {tls.VersionTLS10, tls.VersionTLS10},
	"tlsv1_1":     {tls.VersionTLS11, tls.VersionTLS11},
	"tlsv1_2":     {tls.VersionTLS12, tls.VersionTLS12},
	"tlsv1_3":     {tls.VersionTLS13, tls.VersionTLS13},
	"sslv23":      {tls.VersionTLS10, tls.VersionTLS13},
	"sslv2":       {0x0200, 0x0200},
	"sslv3":       {0x0300, 0x0300},
}

// readTLS reads a TLS transport's options. A bad boolean or method is an
// error at its line; Asterisk would not load the transport.
func readTLS(s *def) (*tlsDef, error) {
	d := &tlsDef{settings: probe.TLSSettings{Transport: strings.Clone(s.name)}}
	d.minVersion, d.maxVersion = tls.VersionTLS10, tls.VersionTLS10
	files := map[string]*variable{"ca_list_file": &d.caFile, "ca_list_path": &d.caPath,
		"cert_file": &d.certFile, "priv_key_file": &d.keyFile, "password": &d.passw}
	for _, v := range s.vars {
		v.value = strings.Clone(v.value)
		if f, ok := files[v.name]; ok {
			*f = v
			continue
		}
		if err := d.option(v); err != nil {
			return nil, optErr(s.name, v, err)
		}
	}
	d.settings.CAFile, d.settings.CAPath = d.caFile.value, d.caPath.value
	d.settings.CertFile, d.settings.KeyFile = d.certFile.value, d.keyFile.value
	return d, nil
}

// option reads one of verify_server, allow_wildcard_certs and method;
// others are ignored.
func (d *tlsDef) option(v variable) error {
	var err error
	switch v.name {
	case "verify_server":
		d.settings.VerifyServer, err = parseBool(v.value)
	case "allow_wildcard_certs":
		d.settings.AllowWildcardCerts, err = parseBool(v.value)
	case "method":
		m := strings.ToLower(v.value)
		versions, ok := tlsMethods[m]
		if !ok {
			return causef(ErrValue, "%q is not a TLS method (default, unspecified, tlsv1, tlsv1_1, tlsv1_2, tlsv1_3, sslv2, sslv3 or sslv23)", v.value)
		}
		d.settings.Method, d.minVersion, d.maxVersion = m, versions[0], versions[1]
	}
	return err
}

// tlsFiles reads a transport's files from the configuration's file
// system; relative names resolve against its directory, as secret_file's.
type tlsFiles struct {
	fsys fs.FS
	dir  string
	// sum digests every setting and file read, for the profile's ID.
	sum []byte
}

// name is the file system's name of a file the configuration names.
func (f *tlsFiles) name(file string) string {
	if !path.IsAbs(file) {
		file = path.Join(f.dir, file)
	}
	return fsName(file)
}

// read reads one file named by option v.
func (f *tlsFiles) read(v variable) ([]byte, error) {
	text, err := readFile(f.fsys, f.name(v.value))
	if err != nil {
		return nil, fileErr(v.value, err)
	}
	f.digest(v.name, text)
	return []byte(text), nil
}

// digest adds a named part to the ID's input.
func (f *tlsFiles) digest(part, data string) {
	f.sum = fmt.Appendf(f.sum, "%s %d\n%s\n", part, len(data), data)
}

// fileErr is the cause of a file that cannot be used.
func fileErr(file string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return fmt.Errorf("%w: file %s: %w", ErrValue, file, err)
}

// buildTLS reads the files of every TLS transport Asterisk loads, in
// file order, into its profile; the first is the one a probe without a
// transport of its own goes through, as pjproject takes the first TLS
// listener when a request names none. A file that is missing or holds no
// certificate or key is an error at its option's line, as Asterisk would
// not load the transport; a private key qualifyd may not read is a
// warning.
func (b *builder) buildTLS() error {
	if b.fsys == nil {
		return nil
	}
	var errs []error
	for _, d := range b.tlsDefs {
		t, err := b.profile(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.tlsProfiles[t.Transport] = t
		b.tlsOrder = append(b.tlsOrder, t)
	}
	return errors.Join(errs...)
}

// profile reads d's files into its profile.
func (b *builder) profile(d *tlsDef) (*probe.TLS, error) {
	f := &tlsFiles{fsys: b.fsys, dir: b.dir}
	t := &probe.TLS{TLSSettings: d.settings, MinVersion: d.minVersion, MaxVersion: d.maxVersion}
	unnamed := d.settings
	unnamed.Transport = "" // transports alike share connections
	f.digest("settings", fmt.Sprintf("%+v %d %d", unnamed, d.minVersion, d.maxVersion))
	var err error
	if t.Roots, err = b.roots(f, d); err != nil {
		return nil, err
	}
	if t.Certificate, err = b.clientCert(f, d, &t.KeyUnreadable); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(f.sum)
	t.ID = hex.EncodeToString(sum[:16])
	return t, nil
}

// roots reads ca_list_file and every certificate file of ca_list_path
// into one pool; nil for neither.
func (b *builder) roots(f *tlsFiles, d *tlsDef) (*x509.CertPool, error) {
	if d.caFile.value == "" && d.caPath.value == "" {
		return nil, nil
	}
	pool := x509.NewCertPool()
	if d.caFile.value != "" {
		data, err := f.read(d.caFile)
		if err == nil && !pool.AppendCertsFromPEM(data) {
			err = causef(ErrValue, "file %s: no PEM certificate in it", d.caFile.value)
		}
		if err != nil {
			return nil, optErr(d.settings.Transport, d.caFile, err)
		}
	}
	if d.caPath.value != "" {
		if err := f.readDir(d.caPath, pool); err != nil {
			return nil, optErr(d.settings.Transport, d.caPath, err)
		}
	}
	return pool, nil
}

// readDir adds the certificates of every file in the directory option v
// names to pool: OpenSSL looks a CA up there by its subject's hash
// (c_rehash's links), qualifyd takes them all.
func (f *tlsFiles) readDir(v variable, pool *x509.CertPool) error {
	entries, err := fs.ReadDir(f.fsys, f.name(v.value))
	if err != nil {
		return fileErr(v.value, err)
	}
	found := false
	for _, e := range entries {
		text, err := readFile(f.fsys, f.name(path.Join(v.value, e.Name())))
		if err == nil && pool.AppendCertsFromPEM([]byte(text)) {
			found = true
			f.digest(e.Name(), text)
		}
	}
	if !found {
		return causef(ErrValue, "directory %s: no file with a PEM certificate in it", v.value)
	}
	return nil
}

// clientCert reads cert_file and priv_key_file into the certificate a
// probe presents; nil without both, as OpenSSL presents no certificate
// without its key. A key qualifyd may not read sets unreadable and adds a
// warning.
func (b *builder) clientCert(f *tlsFiles, d *tlsDef, unreadable *bool) (*tls.Certificate, error) {
	if d.certFile.value == "" || d.keyFile.value == "" {
		return nil, nil
	}
	certPEM, err := f.read(d.certFile)
	if err != nil {
		return nil, optErr(d.settings.Transport, d.certFile, err)
	}
	keyPEM, err := f.read(d.keyFile)
	if errors.Is(err, fs.ErrPermission) {
		*unreadable = true
		v := d.keyFile
		b.warnings = append(b.warnings, &Error{File: v.file, Line: v.line, Section: d.settings.Transport, Option: v.key,
			Err: fmt.Errorf("%w: file %s: permission denied: probes over this transport present no client certificate (give qualifyd a group that may read it, as SupplementaryGroups=asterisk)", ErrUnreadable, v.value)})
		return nil, nil
	}
	if err == nil {
		keyPEM, err = decryptKey(keyPEM, d)
	}
	if err != nil {
		return nil, optErr(d.settings.Transport, d.keyFile, err)
	}
	f.digest("password", d.passw.value)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, optErr(d.settings.Transport, d.keyFile, causef(ErrValue, "file %s: not the key of %s's certificate: %v", d.keyFile.value, d.certFile.value, err))
	}
	return &pair, nil
}

// decryptKey returns a key file's PEM with its key decrypted by password,
// as OpenSSL's password callback would; an unencrypted key unchanged.
func decryptKey(data []byte, d *tlsDef) ([]byte, error) {
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return data, nil
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			return nil, causef(ErrValue, "file %s: an encrypted PKCS #8 key, which qualifyd cannot decrypt (openssl pkey -in it -out a file only qualifyd and Asterisk may read)", d.keyFile.value)
		case x509.IsEncryptedPEMBlock(b): // the legacy "Proc-Type: 4,ENCRYPTED" of OpenSSL's PEM keys
			der, err := x509.DecryptPEMBlock(b, []byte(d.passw.value))
			if err != nil {
				return nil, causef(ErrValue, "file %s: cannot decrypt the key with password: %v", d.keyFile.value, err)
			}
			return pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: der}), nil
		}
	}
}

// tlsOf returns the profile a probe through the transport named name,
// of protocol proto, goes with: its own when it is a TLS transport, the
// first TLS transport's when there is no such transport (Asterisk then
// sends by the URI alone, and pjproject takes the first TLS listener),
// nil for a transport of another protocol.
func (b *builder) tlsOf(name, proto string, found bool) *probe.TLS {
	switch {
	case !found:
		return b.firstTLS()
	case proto == "tls":
		return b.tlsProfiles[name]
	}
	return nil
}

// firstTLS is the first TLS transport's profile, in file order; nil for
// none.
func (b *builder) firstTLS() *probe.TLS {
	if len(b.tlsOrder) == 0 {
		return nil
	}
	return b.tlsOrder[0]
}
