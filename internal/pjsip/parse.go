package pjsip

import (
	"fmt"
	"strings"
)

// line reads one line of file, in the section cur, and returns the
// section open after it. An #include continues in cur.
func (p *parser) line(file string, ln line, cur *section) (*section, error) {
	switch ln.text[0] {
	case '[':
		if err := p.endSection(cur); err != nil {
			return nil, err
		}
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
	if target == nil && p.sources && p.importer == nil {
		return &section{name: newSec.name}, nil // dropped: the AoR may be a source's (Options.Import)
	}
	if target != nil && target.sourced {
		return nil, causef(ErrSyntax, "append (%s) to a source: its options end with its section", opt)
	}
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
