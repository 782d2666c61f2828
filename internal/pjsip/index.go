package pjsip

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// index finds sections by name, case-insensitively as Asterisk's
// strcasecmp (strings.EqualFold): for each folded name, the first and
// last sections of that name, chained through section.next in file order.
// Scanning every section instead made a file of N appends to N sections
// take N squared steps.
type index map[string]chain

type chain struct{ first, last *section }

// addSection adds a copy of s after the sections read so far and
// returns it.
func (p *parser) addSection(s section) *section {
	kept := p.sections.add(s)
	if p.index != nil {
		p.index.add(kept)
	}
	return kept
}

func (x index) add(s *section) {
	key := foldKey(s.name)
	c, ok := x[key]
	if !ok {
		x[key] = chain{s, s}
		return
	}
	c.last.next = s
	c.last = s
	x[key] = c
}

// find returns the first section named name that f matches, or nil. The
// index is built on the first call: files without templates or appends
// never need it.
func (p *parser) find(name string, f filter) *section {
	if p.index == nil {
		p.index = index{}
		for s := range p.sections.all {
			p.index.add(s)
		}
	}
	for s := p.index[foldKey(name)].first; s != nil; s = s.next {
		if f.matches(&p.texts, s) {
			return s
		}
	}
	return nil
}

// foldKey returns a key that two names share exactly when
// strings.EqualFold holds for them: each rune replaced by one member of
// its case-folding orbit (the ASCII lower-case letter where the orbit
// has one, as for 'K', 'k' and the Kelvin sign), each invalid byte by
// U+FFFD as EqualFold decodes it. A name in lower-case ASCII, as most
// are, is its own key.
func foldKey(name string) string {
	i := 0
	for i < len(name) && name[i] < utf8.RuneSelf && (name[i] < 'A' || name[i] > 'Z') {
		i++
	}
	if i == len(name) {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	b.WriteString(name[:i])
	for _, r := range name[i:] {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the member of r's case-folding orbit that stands for
// it: the ASCII lower-case letter if there is one, else the smallest.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return unicode.ToLower(f)
		}
		least = min(least, f)
	}
	if r < utf8.RuneSelf {
		return unicode.ToLower(r)
	}
	return least
}
