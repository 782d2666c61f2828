package pjsip

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Options say where the reader finds files. The zero value reads the
// operating system's files, with includes relative to the main file's
// directory.
type Options struct {
	// ConfigDir is the directory relative #include paths resolve against,
	// as Asterisk's astetcdir; "" means the main file's directory.
	ConfigDir string
	// FS is the file system the files are read from; nil means the
	// operating system's. Names in it are slash paths, and an absolute
	// path /a/b names a/b in FS.
	FS fs.FS
}

// Config is the typed result of reading a configuration.
type Config struct {
	// AoRs are every AoR, sorted by name.
	AoRs []AoR
	// Endpoints are every endpoint, sorted by name.
	Endpoints []Endpoint
	// MaxInitialQualifyTime is the global max_initial_qualify_time; zero
	// when unset.
	MaxInitialQualifyTime time.Duration
}

// parser reads the files of one configuration into sections.
type parser struct {
	fsys     fs.FS
	dir      string
	sections []*section
	index    index // nil until the first find
	filters  map[string]filter
	opts     optionBlocks
	files    []string // every file read, as shown, in order; option.file indexes it
	stack    []openFile
}

// openFile is a file being read: its name in the file system and as shown
// in errors, and its place in parser.files.
type openFile struct {
	name, shown string
	file        int32
}

// fileIndex returns the parser.files index of the file being read.
func (p *parser) fileIndex() int32 {
	return p.stack[len(p.stack)-1].file
}

// Load reads the configuration file at path, with its includes, and
// returns its AoRs and endpoints. Any error rejects the whole file; it is
// an *Error naming the file and line where it can.
func Load(path string, opts Options) (*Config, error) {
	p, name, err := newParser(path, opts)
	if err != nil {
		return nil, err
	}
	src, err := readFile(p.fsys, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInclude, path, err)
	}
	return p.run(name, path, src)
}

// Parse reads src as the configuration file called name; its includes
// are read as Load reads them.
func Parse(name string, src []byte, opts Options) (*Config, error) {
	p, fsName, err := newParser(name, opts)
	if err != nil {
		return nil, err
	}
	return p.run(fsName, name, string(src))
}

// newParser sets up the file system and configuration directory for the
// main file file, and returns its name in the file system.
func newParser(file string, opts Options) (*parser, string, error) {
	p := &parser{fsys: opts.FS, dir: filepath.ToSlash(opts.ConfigDir)}
	if p.fsys == nil {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, "", err
		}
		file = filepath.ToSlash(abs)
		if p.dir, err = absDir(opts.ConfigDir); err != nil {
			return nil, "", err
		}
		p.fsys = os.DirFS("/")
	}
	if p.dir == "" {
		p.dir = path.Dir(path.Clean(file))
	}
	return p, fsName(file), nil
}

// absDir makes a configuration directory absolute; "" stays "".
func absDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	return filepath.ToSlash(abs), err
}

// run parses the main file and builds the typed configuration.
func (p *parser) run(name, shown, src string) (*Config, error) {
	if err := p.parseSource(name, shown, src, nil); err != nil {
		return nil, err
	}
	return build(p.sections, p.files)
}

// builder turns sections into objects, in file order.
type builder struct {
	files      []string
	vars       []variable // the current section's, reused
	aors       []*AoR
	endpoints  []*endpointDef
	auths      map[string]qualify.Credentials
	transports map[string]string
	seen       map[[2]string]*def
	maxInitial int
}

// build reads every non-template section with a type; sections without
// one (unused templates, or plain Asterisk sections) are ignored.
func build(sections []*section, files []string) (*Config, error) {
	b := &builder{
		files:      files,
		auths:      map[string]qualify.Credentials{},
		transports: map[string]string{},
		seen:       map[[2]string]*def{},
	}
	for _, s := range sections {
		t, ok := s.first("type")
		if s.template || !ok {
			continue
		}
		if err := b.section(b.def(s), t.value); err != nil {
			return nil, err
		}
	}
	return b.finish()
}

// def is a section as the builder reads it, its options with their
// files.
type def struct {
	name, file string
	line       int
	vars       []variable
}

// def expands s's options into b.vars, which the next call reuses.
func (b *builder) def(s *section) *def {
	b.vars = b.vars[:0]
	for _, o := range s.opts {
		b.vars = append(b.vars, variable{name: o.key, key: o.key, value: o.value, file: b.files[o.file], line: int(o.line)})
	}
	return &def{name: s.name, file: s.file, line: int(s.line), vars: b.vars}
}

// section reads one section by its type; types qualifyd does not use are
// ignored.
func (b *builder) section(s *def, typ string) error {
	switch typ {
	case "aor", "endpoint", "auth", "transport", "wizard":
		if err := b.unique(s, typ); err != nil {
			return err
		}
	}
	switch typ {
	case "aor":
		return b.addAoR(readAoR(s.name, s.file, s.line, s.vars))
	case "endpoint":
		b.endpoints = append(b.endpoints, readEndpoint(s.name, s.vars))
	case "auth":
		b.auths[s.name] = readAuth(s.vars)
	case "transport":
		return b.addTransport(s)
	case "global":
		return b.addGlobal(s)
	case "wizard":
		return b.addWizard(s)
	}
	return nil
}

// unique rejects a second object of one type and name.
func (b *builder) unique(s *def, typ string) error {
	key := [2]string{typ, s.name}
	if first, ok := b.seen[key]; ok {
		return &Error{File: s.file, Line: s.line, Section: s.name,
			Err: causef(ErrDuplicate, "a second %s named %q (the first is at %s:%d)", typ, s.name, first.file, first.line)}
	}
	b.seen[key] = s
	return nil
}

func (b *builder) addAoR(a *AoR, err error) error {
	if err == nil {
		b.aors = append(b.aors, a)
	}
	return err
}

func (b *builder) addTransport(s *def) error {
	proto, err := readTransport(s.name, s.vars)
	b.transports[s.name] = proto
	return err
}

func (b *builder) addGlobal(s *def) error {
	n, ok, err := readGlobal(s.name, s.vars)
	if ok {
		b.maxInitial = n
	}
	return err
}

// addWizard adds a wizard's objects, which must not clash with others.
func (b *builder) addWizard(s *def) error {
	w, err := readWizard(s)
	if err != nil {
		return err
	}
	for _, typ := range []string{"aor", "endpoint"} {
		if err := b.unique(s, typ); err != nil {
			return err
		}
	}
	b.aors = append(b.aors, w.aor)
	b.endpoints = append(b.endpoints, w.endpoint)
	if w.auth != nil {
		b.auths[s.name+"-oauth"] = *w.auth
	}
	return nil
}

// finish gives each AoR its probe options and sorts the result.
func (b *builder) finish() (*Config, error) {
	cfg := &Config{MaxInitialQualifyTime: time.Duration(b.maxInitial) * time.Second}
	owners := b.endpointsByAoR()
	for _, a := range b.aors {
		if err := b.probe(a, owners[a.Name]); err != nil {
			return nil, err
		}
	}
	// Sorted as pointers, then copied once: an AoR is a few hundred
	// bytes, and sorting and appending the values was most of the time
	// of a million-AoR file (issue 7).
	sorted := slices.Clone(b.aors)
	slices.SortFunc(sorted, func(x, y *AoR) int { return cmp.Compare(x.Name, y.Name) })
	cfg.AoRs = make([]AoR, len(sorted))
	for i, a := range sorted {
		cfg.AoRs[i] = *a
	}
	for _, e := range b.endpoints {
		cfg.Endpoints = append(cfg.Endpoints, e.Endpoint)
	}
	slices.SortFunc(cfg.Endpoints, func(x, y Endpoint) int { return cmp.Compare(x.Name, y.Name) })
	return cfg, nil
}

// endpointsByAoR returns, for each AoR name an endpoint lists in aors=, the
// first such endpoint in file order. Looking it up per AoR by scanning
// every endpoint made a file of N endpoints and N AoRs take N squared
// steps: 9 s at 40,000 of each (issue 7).
func (b *builder) endpointsByAoR() map[string]*endpointDef {
	owners := make(map[string]*endpointDef, len(b.endpoints))
	for _, e := range b.endpoints {
		for _, name := range e.AoRs {
			if _, ok := owners[name]; !ok {
				owners[name] = e
			}
		}
	}
	return owners
}

// probe fills a.Probe from e, the first endpoint, in file order, whose
// aors lists a (nil: none). The AoR's own outbound_proxy wins over the
// endpoint's, as Asterisk sets the contact's proxy after the endpoint's.
func (b *builder) probe(a *AoR, e *endpointDef) error {
	if e == nil {
		return nil
	}
	if a.Probe.OutboundProxy == "" {
		a.Probe.OutboundProxy = e.outboundProxy.value
	}
	a.Probe.FromUser, a.Probe.FromDomain = e.fromUser.value, e.fromDomain.value
	var err error
	if a.Probe.Transport, err = b.transportOf(e); err != nil {
		return err
	}
	a.Probe.Auth, err = b.authOf(e)
	return err
}

// transportOf returns the protocol of e's transport, "" when it names
// none.
func (b *builder) transportOf(e *endpointDef) (string, error) {
	name := e.transport.value
	if name == "" {
		return "", nil
	}
	proto, ok := b.transports[name]
	if !ok {
		return "", optErr(e.Name, e.transport, causef(ErrReference, "no transport section %q", name))
	}
	return proto, nil
}

// authOf returns the credentials of e's first outbound_auth.
func (b *builder) authOf(e *endpointDef) (qualify.Credentials, error) {
	names := splitList(e.outboundAuth.value)
	if len(names) == 0 {
		return qualify.Credentials{}, nil
	}
	c, ok := b.auths[names[0]]
	if !ok {
		return c, optErr(e.Name, e.outboundAuth, causef(ErrReference, "no auth section %q", names[0]))
	}
	return c, nil
}
