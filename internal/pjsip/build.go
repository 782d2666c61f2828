package pjsip

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
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
	// Import, if set, returns the objects of each type=source section,
	// added where the section ends (source.go). Without it sources
	// import nothing, and an append after a source that matches no
	// section is dropped rather than refused, as its AoR may be one the
	// source would import.
	Import Importer
	// NoteAsterisk makes the reader note the AoRs an unpatched Asterisk
	// would refuse (Config.NotAsterisk): check-config's warnings. Off, the
	// daemon keeps no note of a large pjsip.conf's AoRs.
	NoteAsterisk bool
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
	// Panic is the global panic rule: when the sinks push every object
	// up, as a mass outage is more likely qualifyd's own.
	Panic Panic
	// Sinks are the type=sink sections, in file order.
	Sinks []*Sink
	// Sources are the type=source sections, in file order.
	Sources []*Source
	// Cluster is the type=cluster section, nil for none (a single node).
	Cluster *Cluster
	// TLS are the TLS transports' client profiles, in file order: what a
	// probe through each trusts and presents (transport.go).
	TLS []*probe.TLS
	// Warnings are what Asterisk would log and carry on from (see the
	// package doc): a second object of one name in a type other than
	// aor, endpoint and wizard (ErrDuplicate; once per type, as read),
	// then each endpoint's transport or outbound_auth that is not defined
	// (ErrReference; in its first AoR's file order), then each TLS
	// transport's priv_key_file qualifyd may not read (ErrUnreadable).
	// The configuration is loaded with them.
	Warnings []*Error
	// NotAsterisk are, with Options.NoteAsterisk, the AoRs that set
	// options an unpatched Asterisk does not define (ErrNotAsterisk), one
	// note each, in file order:
	// read by an Asterisk too, such an AoR is not loaded unless it has
	// contrib/asterisk's qualify patches (or at all, for qualifyd's own
	// options). qualifyd loads them as any other; check-config prints the
	// notes.
	NotAsterisk []*Error
}

// Panic is the global panic_threshold, panic_min_destinations and
// panic_hold_threshold: the sinks push only ups while more than
// Threshold percent of the distinct destinations qualifyd qualifies are
// failing, when there are at least MinDestinations of them; while more
// than HoldThreshold percent are recently failing (their streak begun
// within the wait), short of a panic, a Down that follows an Up waits
// for it a bounded time. Threshold 100 never panics.
type Panic struct {
	// Threshold is the percentage of destinations failing above which
	// qualifyd panics, 1..100 (default 50).
	Threshold int
	// MinDestinations is the fewest destinations qualifyd must qualify
	// to panic, at least 1 (default 10).
	MinDestinations int
	// HoldThreshold is the percentage of destinations recently failing
	// above which a Down waits for a panic, 1..100 (default 10); at or
	// above Threshold none waits.
	HoldThreshold int
}

// Panic defaults.
const (
	DefaultPanicThreshold       = 50
	DefaultPanicMinDestinations = 10
	DefaultPanicHoldThreshold   = 10
)

// parser reads the files of one configuration into sections.
type parser struct {
	fsys     fs.FS
	dir      string
	sections sectionBlocks
	index    index // nil until the first find
	filters  map[string]filter
	opts     optionBlocks
	files    []string // every file read, as shown, in order; option.file indexes it
	texts    texts
	stack    []openFile
	// importer is Options.Import; open is the section open after the
	// last line read; sources is set once a type=source section ended;
	// pseudo maps an imported object's file to its place in files.
	importer Importer
	// noteAsterisk is Options.NoteAsterisk.
	noteAsterisk bool
	open         *section
	sources      bool
	pseudo       map[string]int32
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
// returns its AoRs and endpoints. Any error rejects the whole file: the
// error is an *Error naming the file and line where it can, or the
// sections' several *Errors joined (see Errors).
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
	p := &parser{fsys: opts.FS, dir: filepath.ToSlash(opts.ConfigDir), importer: opts.Import, noteAsterisk: opts.NoteAsterisk}
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

// run parses the main file and builds the typed configuration. The
// parser's index and blocks are handed to the builder and dropped, so
// that it can release the sections as it reads them.
func (p *parser) run(name, shown, src string) (*Config, error) {
	if err := p.parseSource(name, shown, src, nil); err != nil {
		return nil, err
	}
	if err := p.endSection(p.open); err != nil {
		return nil, err
	}
	sections, files, texts, secret, dir, note, fsys := p.sections, p.files, p.texts, secretReader(p), p.dir, p.noteAsterisk, p.fsys
	*p = parser{}
	b := newBuilder(files, &texts, secret, dir, note)
	b.fsys = fsys
	return b.build(sections)
}

// builder turns sections into objects, in file order.
type builder struct {
	files []string
	texts *texts
	cur   def        // the section being read; def reuses it
	vars  []variable // cur's, reused
	// aors are every AoR, each built in place at its place in name
	// order: a million AoRs are 80 MB, so they are neither grown by
	// append nor moved to sort them.
	aors []AoR
	// order is the AoRs' names and places in file order, sorted by name;
	// slot maps a place in file order to the AoR's index in aors.
	order []nameAt
	slot  []int32
	// next is the file-order place of the next AoR.
	next      int
	endpoints []*endpointDef
	// auths are the auth sections', wizardAuths the wizards' NAME-oauth.
	auths, wizardAuths map[string]probe.Credentials
	transports         map[string]string
	// tlsDefs are the TLS transports as read; tlsProfiles and tlsOrder
	// their profiles, by name and in file order, once their files are
	// read from fsys (nil: not read).
	tlsDefs     []*tlsDef
	tlsProfiles map[string]*probe.TLS
	tlsOrder    []*probe.TLS
	fsys        fs.FS
	// seen holds the first object of each type and name, but AoRs:
	// duplicate finds a second AoR of one name in the sorted names.
	seen     map[seenKey]place
	global   global
	policies policySet
	sinks    []*Sink
	sources  []*Source
	cluster  *Cluster
	dir      string                            // resolves a source's relative path=
	secret   func(name string) (string, error) // reads a sink's secret_file
	// dropped holds the types of which a second object of one name was
	// found (see unique); warnings are the Config's.
	dropped  map[string]bool
	warnings []*Error
	// notAsterisk are the Config's NotAsterisk, noted when note is set.
	note        bool
	notAsterisk []*Error
}

type seenKey struct{ typ, name string }

// place is where a section begins, for an error about a later one.
type place struct {
	file string
	line int
}

// build reads every non-template section with a type; sections without
// one (unused templates, or plain Asterisk sections) are ignored. Each
// block of sections is dropped once read.
func build(sections sectionBlocks, files []string, texts *texts, secret func(string) (string, error), dir string, note bool) (*Config, error) {
	return newBuilder(files, texts, secret, dir, note).build(sections)
}

// newBuilder returns a builder of the sections of files.
func newBuilder(files []string, texts *texts, secret func(string) (string, error), dir string, note bool) *builder {
	return &builder{
		note:        note,
		secret:      secret,
		dir:         dir,
		files:       files,
		texts:       texts,
		auths:       map[string]probe.Credentials{},
		wizardAuths: map[string]probe.Credentials{},
		transports:  map[string]string{},
		tlsProfiles: map[string]*probe.TLS{},
		seen:        map[seenKey]place{},
		dropped:     map[string]bool{},
	}
}

// build reads sections (see the function build).
func (b *builder) build(sections sectionBlocks) (*Config, error) {
	b.order = byName(b.texts, &sections)
	b.aors, b.slot = make([]AoR, len(b.order)), slots(b.order)
	errs := b.sections(sections.blocks)
	b.vars = nil
	return b.finish(errs)
}

// MaxErrors is how many errors of its sections a configuration is
// reported with at most: reading stops at the MaxErrors-th.
const MaxErrors = 20

// sections reads the blocks in order, dropping each once read, and
// returns the sections' errors in file order, at most MaxErrors: an
// error in one section does not stop the others being read, so that one
// check-config names every broken section.
func (b *builder) sections(blocks [][]section) []error {
	var errs []error
	for i, blk := range blocks {
		blocks[i] = nil
		for j := range blk {
			s := &blk[j]
			t, ok := b.texts.first(s, "type")
			if s.template || !ok {
				continue
			}
			if err := b.section(b.def(s), t); err != nil {
				if errs = append(errs, err); len(errs) == MaxErrors {
					return errs
				}
			}
		}
	}
	return errs
}

// def is a section as the builder reads it, its options with their
// files.
type def struct {
	name, file string
	line       int
	vars       []variable
}

// def expands s into b.cur and its options into b.vars, which the next
// call reuses.
func (b *builder) def(s *section) *def {
	b.cur = defOf(b.texts, b.files, s, b.vars[:0])
	b.vars = b.cur.vars
	return &b.cur
}

// defOf expands s, its options appended to vars.
func defOf(t *texts, files []string, s *section, vars []variable) def {
	for _, o := range s.opts {
		key, value := t.option(o)
		vars = append(vars, variable{name: key, key: key, value: value, file: files[o.file], line: int(o.line)})
	}
	return def{name: s.name, file: s.file, line: int(s.line), vars: vars}
}

// section reads one section by its type; types qualifyd does not use are
// ignored, but for their duplicates.
func (b *builder) section(s *def, typ string) error {
	if typ != "aor" {
		if err := b.unique(s, typ); err != nil {
			return err
		}
	}
	switch typ {
	case "aor":
		// Named even when it fails: its name came before its options,
		// and finish reports a second AoR of one name first.
		a := b.newAoR()
		b.noteAsterisk(s, false)
		return readAoR(a, s.name, s.file, s.line, s.vars, &b.policies)
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
	case "sink":
		return b.addSink(s)
	case "source":
		return b.addSource(s)
	case "cluster":
		return b.addCluster(s)
	}
	return nil
}

// noteAsterisk keeps the note of an AoR an unpatched Asterisk would not
// load (notAsterisk).
func (b *builder) noteAsterisk(s *def, wizard bool) {
	if !b.note {
		return
	}
	if e := notAsterisk(s, wizard); e != nil {
		b.notAsterisk = append(b.notAsterisk, e)
	}
}

// newAoR returns the place of the next AoR in file order.
func (b *builder) newAoR() *AoR {
	b.next++
	return &b.aors[b.slot[b.next-1]]
}

// unique checks that s is the first object of its type and name. A
// second endpoint or wizard is an error: Asterisk would load no endpoint
// (and a wizard is an endpoint); so is a second sink, source or cluster, qualifyd's
// own. A
// second object of another type is a
// warning, once per type, and the type is dropped: Asterisk's
// res_sorcery_config (sorcery_config_internal_load) stops loading a type
// at its first duplicate and keeps none of the file's objects of it.
func (b *builder) unique(s *def, typ string) error {
	key := seenKey{typ, s.name}
	first, ok := b.seen[key]
	if !ok {
		b.seen[key] = place{s.file, s.line}
		return nil
	}
	e := &Error{File: s.file, Line: s.line, Section: s.name,
		Err: causef(ErrDuplicate, "a second %s named %q (the first is at %s:%d)", typ, s.name, first.file, first.line)}
	if typ == "endpoint" || typ == "wizard" || typ == "sink" || typ == "source" || typ == "cluster" {
		return e
	}
	if !b.dropped[typ] {
		b.dropped[typ] = true
		e.Err = fmt.Errorf("%w; Asterisk loads no %s of this configuration", e.Err, typ)
		b.warnings = append(b.warnings, e)
	}
	return nil
}

// addTransport reads a transport's protocol and, for TLS, the options
// that shape its connections (transport.go).
func (b *builder) addTransport(s *def) error {
	proto, err := readTransport(s.name, s.vars)
	b.transports[s.name] = proto
	if err != nil || proto != "tls" {
		return err
	}
	d, err := readTLS(s)
	if err == nil {
		b.tlsDefs = append(b.tlsDefs, d)
	}
	return err
}

func (b *builder) addGlobal(s *def) error {
	return readGlobal(&b.global, s.name, s.vars)
}

// addWizard adds a wizard's objects, which must not clash with others.
// Its AoR is named once the wizard is read.
func (b *builder) addWizard(s *def) error {
	w, err := readWizard(s, b.newAoR(), &b.policies)
	if err != nil {
		return err
	}
	b.noteAsterisk(s, true)
	if err := b.unique(s, "endpoint"); err != nil {
		return err
	}
	b.endpoints = append(b.endpoints, w.endpoint)
	if w.auth != nil {
		b.wizardAuths[s.name+"-oauth"] = *w.auth
	}
	return nil
}

// addSink reads a type=sink section (sink.go).
func (b *builder) addSink(s *def) error {
	k, err := readSink(s, b.secret)
	if err == nil {
		b.sinks = append(b.sinks, k)
	}
	return err
}

// addSource reads a type=source section (source.go).
func (b *builder) addSource(s *def) error {
	src, err := readSource(s, b.dir, b.secret)
	if err == nil {
		b.sources = append(b.sources, src)
	}
	return err
}
