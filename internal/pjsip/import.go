package pjsip

import (
	"fmt"
	"strings"
	"unicode"
)

// endSection imports the objects of s, the section open before a header
// or at the end of the configuration, when s is a type=source section
// read for the first time (Options.Import).
func (p *parser) endSection(s *section) error {
	if s == nil || s.template || s.sourced {
		return nil
	}
	if typ, ok := p.texts.first(s, "type"); !ok || typ != "source" {
		return nil
	}
	s.sourced, p.sources = true, true
	if p.importer == nil {
		return nil
	}
	d := defOf(&p.texts, p.files, s, nil)
	src, err := readSource(&d, p.dir, secretReader(p))
	if err != nil {
		return err
	}
	tmpl, err := p.template(src, &d)
	if err != nil {
		return err
	}
	objs, err := p.importer(src)
	if err != nil {
		return &Error{File: d.file, Line: d.line, Section: d.name, Err: fmt.Errorf("%w: %w", ErrSource, err)}
	}
	for i := range objs {
		if err := p.addObject(&objs[i], tmpl); err != nil {
			return err
		}
	}
	return nil
}

// template finds the section a source's AoRs start from, nil for none.
func (p *parser) template(src *Source, d *def) (*section, error) {
	if src.Template == "" {
		return nil, nil
	}
	t := p.find(src.Template, filter{templates: templatesInclude})
	if t == nil {
		v, _ := lastOf(d.vars, "template")
		return nil, optErr(d.name, v, causef(ErrNoSection, "%q is not defined before the source", src.Template))
	}
	return t, nil
}

// importTypes are the types of object a source may import.
var importTypes = map[string]bool{"aor": true, "endpoint": true, "auth": true}

// addObject adds one imported object as a section: type= first, then
// the template's options for an AoR, then its own.
func (p *parser) addObject(o *Object, tmpl *section) error {
	if err := checkObject(o); err != nil {
		return &Error{File: o.File, Line: o.Line, Section: o.Name, Err: err}
	}
	file := p.pseudoFile(o.File)
	at := line{num: o.Line, off: -1}
	sec := section{name: o.Name, file: o.File, line: int32(o.Line)}
	add := func(opt option) error { return sec.add(&p.opts, opt) }
	if err := add(p.texts.newOption(file, at, "type", o.Type)); err != nil {
		return err
	}
	if tmpl != nil && o.Type == "aor" {
		for _, opt := range tmpl.opts {
			if err := add(opt); err != nil {
				return err
			}
		}
	}
	for _, kv := range o.Options {
		if err := add(p.texts.newOption(file, at, kv.Key, kv.Value)); err != nil {
			return err
		}
	}
	p.addSection(sec)
	return nil
}

// checkObject refuses an object no file could have written: an unknown
// type, or a name that is empty or holds a bracket or a control
// character.
func checkObject(o *Object) error {
	if !importTypes[o.Type] {
		return causef(ErrSource, "an imported object of type %q (want aor, endpoint or auth)", o.Type)
	}
	if o.Name == "" || strings.ContainsAny(o.Name, "[]") || strings.ContainsFunc(o.Name, unicode.IsControl) {
		return causef(ErrSource, "%q is not a section name", o.Name)
	}
	for _, kv := range o.Options {
		if kv.Key == "" || kv.Key == "type" || strings.ContainsFunc(kv.Key+kv.Value, unicode.IsControl) {
			return causef(ErrSource, "option %q=%q cannot be imported", kv.Key, kv.Value)
		}
	}
	return nil
}

// pseudoFile returns the place in files of an imported object's file.
func (p *parser) pseudoFile(name string) int32 {
	if i, ok := p.pseudo[name]; ok {
		return i
	}
	if p.pseudo == nil {
		p.pseudo = map[string]int32{}
	}
	p.files = append(p.files, name)
	p.texts.files = append(p.texts.files, "")
	i := int32(len(p.files) - 1)
	p.pseudo[name] = i
	return i
}

// CheckObjects reads objs as a configuration holding only them, and
// returns its errors: the values a driver passed through from its
// router, checked as the same options in a file are, each error at its
// object's File and Line. What objs refer to but do not hold (an
// endpoint's transport, an AoR of the file) is not looked up, and no
// template applies.
func CheckObjects(objs []Object) error {
	p := &parser{}
	for i := range objs {
		if err := p.addObject(&objs[i], nil); err != nil {
			return err
		}
	}
	_, err := build(p.sections, p.files, &p.texts, nil, "", false)
	return err
}
