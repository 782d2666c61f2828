package pjsip

import (
	"fmt"
	"math"
	"strings"
)

// maxVars bounds the options of one section. Inheriting a section into
// itself doubles it; Asterisk loops forever on that, qualifyd stops here.
const maxVars = 1 << 16

// variable is one option line, key = value, with where it was written,
// as the builder reads it.
type variable struct {
	// name is the option as the reader looks it up (a wizard's "aor/"
	// prefix removed); key is as written, for errors.
	name, key string
	value     string
	file      string
	line      int
}

// option is one option line as a section keeps it until the end of the
// configuration: 16 bytes where a variable takes 72, as a million-AoR
// file keeps three million of them (issue 7). It is where the line's
// text is in its file, split again into key and value when read
// (texts.option); or, for a line cut by a comment or a value grown by
// "+=", its place in texts.extra.
type option struct {
	// file indexes parser.files and texts.files; line is 1-based.
	file, line int32
	// off and n locate the line's text in the file; n is extra for an
	// option kept in texts.extra[off].
	off, n uint32
}

// extra marks an option kept in texts.extra.
const extra = math.MaxUint32

// texts are the files read, whose lines the options point into, and the
// options that are no line of a file.
type texts struct {
	files []string
	extra []keyValue
}

type keyValue struct{ key, value string }

// option returns o's key and its value, stripped, as assign read them.
func (t *texts) option(o option) (key, value string) {
	if o.n == extra {
		kv := t.extra[o.off]
		return kv.key, kv.value
	}
	key, value, _, _ = splitOption(t.files[o.file][o.off : o.off+o.n])
	return key, trimBlanks(value)
}

// newOption returns the option of the line ln of file, key = value.
func (t *texts) newOption(file int32, ln line, key, value string) option {
	o := option{file: file, line: int32(ln.num), off: uint32(ln.off), n: uint32(len(ln.text))}
	if ln.off < 0 || uint64(ln.off)+uint64(len(ln.text)) >= extra {
		t.extra = append(t.extra, keyValue{key, value})
		o.off, o.n = uint32(len(t.extra)-1), extra
	}
	return o
}

// section is one [name] of the merged configuration: its own options, then
// appended ones, with inherited ones copied in where the header named them.
type section struct {
	name     string
	file     string
	line     int32
	template bool
	opts     []option
	// next is the next section whose name folds to the same key, once
	// the parser indexes sections by name.
	next *section
}

// first returns the value of s's first option called name, as Asterisk's
// sorcery uses for type=.
func (t *texts) first(s *section, name string) (string, bool) {
	for _, o := range s.opts {
		if key, value := t.option(o); key == name {
			return value, true
		}
	}
	return "", false
}

// add appends o to the section's options, in the shared blocks of opts.
func (s *section) add(opts *optionBlocks, o option) error {
	if len(s.opts) >= maxVars {
		return causef(ErrSyntax, "more than %d options in one section", maxVars)
	}
	s.opts = opts.add(s.opts, o)
	return nil
}

// sectionBlocks holds the sections in file order, in blocks that never
// move, so that a *section stays valid and the builder can drop each
// block once it has read it.
type sectionBlocks struct {
	blocks [][]section
}

const sectionBlockSize = 1024

// add appends a copy of s and returns where it is kept.
func (b *sectionBlocks) add(s section) *section {
	n := len(b.blocks)
	if n == 0 || len(b.blocks[n-1]) == cap(b.blocks[n-1]) {
		b.blocks, n = append(b.blocks, make([]section, 0, sectionBlockSize)), n+1
	}
	blk := append(b.blocks[n-1], s)
	b.blocks[n-1] = blk
	return &blk[len(blk)-1]
}

// all yields every section in file order.
func (b *sectionBlocks) all(yield func(*section) bool) {
	for _, blk := range b.blocks {
		for i := range blk {
			if !yield(&blk[i]) {
				return
			}
		}
	}
}

// optionBlocks hands out the options of sections from shared blocks. A
// section's options are mostly written one after the other, so they take
// consecutive places in the current block and grow there; one that grows
// elsewhere (an append to an earlier section) is copied out by append.
// A million sections then cost a thousand allocations, not three million.
type optionBlocks struct {
	block []option
}

const optionBlockSize = 1024

func (b *optionBlocks) add(opts []option, o option) []option {
	n := len(b.block)
	last := len(opts) == 0 || n > 0 && &opts[len(opts)-1] == &b.block[n-1]
	if cap(opts) > len(opts) || !last || n == cap(b.block) && len(opts) > 0 {
		return append(opts, o)
	}
	if n == cap(b.block) {
		b.block, n = make([]option, 0, optionBlockSize), 0
	}
	b.block = append(b.block, o)
	return b.block[n-len(opts) : n+1 : n+1]
}

// line reads one line of file, in the section cur, and returns the
// section open after it. An #include continues in cur.
func (p *parser) line(file string, ln line, cur *section) (*section, error) {
	switch ln.text[0] {
	case '[':
		return p.header(file, ln)
	case '#':
		return cur, p.directive(file, ln, cur)
	}
	return cur, p.assign(file, ln, cur)
}

// header reads "[name]" with optional "(opts)": "!" template, "+" or
// "+filter" append, any other word a section to inherit from, in order, as
// process_text_line. Text after "]" not starting with "(" is ignored, as
// Asterisk.
func (p *parser) header(file string, ln line) (*section, error) {
	end := strings.IndexByte(ln.text, ']')
	if end < 0 {
		return nil, &Error{File: file, Line: ln.num, Err: causef(ErrSyntax, "no closing ']' in %q", ln.text)}
	}
	name, rest := ln.text[1:end], ln.text[end+1:]
	fail := func(err error) (*section, error) {
		return nil, &Error{File: file, Line: ln.num, Section: name, Err: err}
	}
	if !strings.HasPrefix(rest, "(") {
		return p.addSection(section{name: name, file: file, line: int32(ln.num)}), nil
	}
	newSec := &section{name: name, file: file, line: int32(ln.num)}
	closeAt := strings.IndexByte(rest, ')')
	if closeAt < 0 {
		return fail(causef(ErrSyntax, "no closing ')' in %q", ln.text))
	}
	cur, err := p.headerOptions(newSec, strings.Split(rest[1:closeAt], ","))
	if err != nil {
		return fail(err)
	}
	if cur == newSec {
		cur = p.addSection(*newSec)
	}
	return cur, nil
}

// headerOptions applies a header's options to newSec; after an append the
// current section is the earlier one, and later options apply to it.
func (p *parser) headerOptions(newSec *section, opts []string) (*section, error) {
	cur := newSec
	for _, opt := range opts {
		var err error
		switch {
		case opt == "!":
			cur.template = true
		case strings.HasPrefix(opt, "+"):
			cur, err = p.appendTo(cur, newSec, opt)
		case opt == "":
			err = causef(ErrSyntax, "empty name in the section's options")
		default:
			err = p.inherit(cur, opt)
		}
		if err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// appendTo resolves "(+filter)": the first earlier non-template section of
// the same name whose options match filter. The options of newSec so far
// (inherited ones) move to it.
func (p *parser) appendTo(cur, newSec *section, opt string) (*section, error) {
	f, err := p.filter(opt[1:])
	if err != nil {
		return nil, err
	}
	target := p.find(newSec.name, f)
	if target == nil {
		if opt == "+" {
			return nil, causef(ErrNoSection, "append (+) to a section not defined before")
		}
		return nil, causef(ErrNoSection, "append (%s) matches no section defined before", opt)
	}
	if cur == newSec {
		target.template = target.template || newSec.template
		for _, o := range newSec.opts {
			if err := target.add(&p.opts, o); err != nil {
				return nil, err
			}
		}
	}
	return target, nil
}

// inherit copies the options of the first section named base, template or
// not, into cur: a snapshot, as ast_category_inherit.
func (p *parser) inherit(cur *section, base string) error {
	b := p.find(base, filter{templates: templatesInclude})
	if b == nil {
		return causef(ErrNoSection, "inherits from %q, which is not defined before", base)
	}
	opts := b.opts
	if b == cur {
		opts = append([]option(nil), opts...)
	}
	for _, o := range opts {
		if err := cur.add(&p.opts, o); err != nil {
			return err
		}
	}
	return nil
}

// assign reads "key = value", "key => value" or "key += value" (appends to
// the last value of key, or sets it when there is none).
func (p *parser) assign(file string, ln line, cur *section) error {
	if cur == nil {
		return &Error{File: file, Line: ln.num, Err: causef(ErrSyntax, "option %q outside any section", ln.text)}
	}
	fail := func(err error) error {
		return &Error{File: file, Line: ln.num, Section: cur.name, Err: err}
	}
	name, value, plus, err := splitOption(ln.text)
	if err != nil {
		return fail(err)
	}
	if plus && p.appendValue(cur, name, value) {
		return nil
	}
	o := p.texts.newOption(p.fileIndex(), ln, name, trimBlanks(value))
	if err := cur.add(&p.opts, o); err != nil {
		return fail(err)
	}
	return nil
}

// splitOption splits an option line at its first '=' as process_text_line:
// a leading backslash escapes the key's first character, "=>" is "=",
// and "+=" appends. The value is returned unstripped.
func splitOption(text string) (name, value string, plus bool, err error) {
	orig, from := text, 0
	if text[0] == '\\' {
		text, from = text[1:], 1
		if text == "" || text[0] < 33 {
			return "", "", false, causef(ErrSyntax, "invalid escape in %q", orig)
		}
	}
	eq := strings.IndexByte(text[from:], '=')
	if eq < 0 {
		return "", "", false, causef(ErrSyntax, "no '=' in %q", orig)
	}
	eq += from
	plus = eq > from && text[eq-1] == '+'
	if plus {
		name, value = text[:eq-1], text[eq+1:]
	} else {
		name, value = text[:eq], strings.TrimPrefix(text[eq+1:], ">")
	}
	if name = trimBlanks(name); name == "" {
		return "", "", false, causef(ErrSyntax, "no option name in %q", orig)
	}
	return name, value, plus, nil
}

// appendValue adds value to the last option called name, which then
// is no line of a file, and reports whether there was one.
func (p *parser) appendValue(cur *section, name, value string) bool {
	for i := len(cur.opts) - 1; i >= 0; i-- {
		o := &cur.opts[i]
		if key, old := p.texts.option(*o); key == name {
			p.texts.extra = append(p.texts.extra, keyValue{key, trimBlanks(old + value)})
			o.off, o.n = uint32(len(p.texts.extra)-1), extra
			return true
		}
	}
	return false
}

// directive reads #include, #tryinclude and #exec (refused).
func (p *parser) directive(file string, ln line, cur *section) error {
	name, arg := ln.text[1:], ""
	if i := strings.IndexFunc(name, func(r rune) bool { return r <= ' ' }); i >= 0 {
		name, arg = name[:i], trimBlanks(name[i+1:])
	}
	fail := func(sentinel error, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		return &Error{File: file, Line: ln.num, Err: causef(sentinel, "#%s %s", name, msg)}
	}
	switch strings.ToLower(name) {
	case "include", "tryinclude":
		if arg == "" {
			return fail(ErrSyntax, "needs a file name")
		}
		return p.include(file, ln, dequote(arg), strings.EqualFold(name, "tryinclude"), cur)
	case "exec":
		return fail(ErrInclude, "%q: refused, qualifyd never runs programs from its configuration", dequote(arg))
	}
	return fail(ErrSyntax, "is not a directive (want #include or #tryinclude)")
}

// dequote strips one pair of "" or <> around an include's argument.
func dequote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '<' && s[len(s)-1] == '>') {
		return s[1 : len(s)-1]
	}
	return s
}
