package pjsip

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
)

// include reads the files that pattern names: resolved against the
// configuration directory unless absolute, expanded as a glob (sorted), each
// read in turn with cur as its starting section. A pattern naming no file
// is an error for #include and nothing for #tryinclude.
func (p *parser) include(file string, ln line, pattern string, try bool, cur *section) error {
	fail := func(sentinel error, format string, args ...any) error {
		return &Error{File: file, Line: ln.num, Err: causef(sentinel, "#include %q: "+format, append([]any{pattern}, args...)...)}
	}
	resolved := pattern
	if !path.IsAbs(pattern) {
		resolved = path.Join(p.dir, pattern)
	}
	names, err := fs.Glob(p.fsys, fsName(resolved))
	if err != nil {
		return fail(ErrInclude, "%v", err)
	}
	if len(names) == 0 && !try {
		return fail(ErrInclude, "no such file (resolved to %s)", path.Clean(resolved))
	}
	for _, name := range names {
		shown := name
		if path.IsAbs(resolved) {
			shown = "/" + name
		}
		if chain, loop := p.loop(name, shown); loop {
			return fail(ErrIncludeLoop, "%s", chain)
		}
		src, err := readFile(p.fsys, name)
		if err != nil {
			return fail(ErrInclude, "%s: %v", shown, err)
		}
		if err := p.parseSource(name, shown, src, cur); err != nil {
			return err
		}
	}
	return nil
}

// fsName maps a slash path to a name in the file system: an absolute path
// /a/b is a/b under its root.
func fsName(p string) string {
	p = strings.TrimLeft(path.Clean(p), "/")
	if p == "" {
		return "."
	}
	return p
}

// loop reports whether name is being read already, with the chain of
// includes that leads back to it.
func (p *parser) loop(name, shown string) (string, bool) {
	for i, f := range p.stack {
		if f.name == name {
			var chain []string
			for _, g := range p.stack[i:] {
				chain = append(chain, g.shown)
			}
			return strings.Join(append(chain, shown), " -> "), true
		}
	}
	return "", false
}

// readFile reads one regular file of the file system into a string,
// copied once: the lines, and the options in them, are substrings of it.
func readFile(fsys fs.FS, name string) (string, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	b.Grow(int(info.Size()) + 1)
	if _, err := io.Copy(&b, f); err != nil {
		return "", err
	}
	return b.String(), nil
}

// parseSource parses src as the file name, shown in errors as shown. Its
// comment errors come first, as Asterisk reads a whole file before it
// processes its lines.
func (p *parser) parseSource(name, shown, src string, cur *section) error {
	if err := checkComments(shown, src); err != nil {
		return err
	}
	p.files = append(p.files, shown)
	p.texts.files = append(p.texts.files, src)
	p.stack = append(p.stack, openFile{name: name, shown: shown, file: int32(len(p.files) - 1)})
	defer func() { p.stack = p.stack[:len(p.stack)-1] }()
	return eachLine(shown, src, func(ln line) error {
		var err error
		cur, err = p.line(shown, ln, cur)
		p.open = cur
		return err
	})
}
