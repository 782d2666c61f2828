package pjsip

import (
	"regexp"
	"strings"
)

// templateMode says whether a filter matches templates.
type templateMode int

const (
	templatesExclude  templateMode = iota // the default: never a template
	templatesInclude                      // TEMPLATES=include: templates too
	templatesRestrict                     // TEMPLATES=restrict: only templates
)

// cond is one name=regex condition of a filter.
type cond struct {
	name string
	re   *regexp.Regexp
}

// filter is the "type=aor&..." of "[name](+type=aor)", as Asterisk's
// does_category_match: every condition must match some option of the
// section (name case-insensitively, value by an unanchored POSIX extended
// regular expression).
type filter struct {
	conds     []cond
	templates templateMode
}

// parseFilter reads a filter: conditions separated by '&', each
// "name=value"; empty names are skipped; TEMPLATES=include and
// TEMPLATES=restrict set which sections may match.
func parseFilter(s string) (filter, error) {
	var f filter
	if trimBlanks(s) == "" {
		return f, nil
	}
	for _, part := range strings.Split(s, "&") {
		part = trimBlanks(part)
		switch {
		case strings.EqualFold(part, "TEMPLATES=include"):
			f.templates = templatesInclude
			continue
		case strings.EqualFold(part, "TEMPLATES=restrict"):
			f.templates = templatesRestrict
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		if name = trimBlanks(name); name == "" {
			continue
		}
		value, _, _ = strings.Cut(value, "=")
		re, err := regexp.CompilePOSIX(trimBlanks(value))
		if err != nil {
			return f, causef(ErrSyntax, "filter %q: %v", part, err)
		}
		f.conds = append(f.conds, cond{name: name, re: re})
	}
	return f, nil
}

// filter returns the filter s, compiled once per configuration: an
// overlay of a million "(+type=aor)" appends compiles one regexp, not a
// million.
func (p *parser) filter(s string) (filter, error) {
	if f, ok := p.filters[s]; ok {
		return f, nil
	}
	f, err := parseFilter(s)
	if err == nil {
		if p.filters == nil {
			p.filters = map[string]filter{}
		}
		p.filters[s] = f
	}
	return f, err
}

// matches reports whether s, whose options are in t, passes the filter.
func (f filter) matches(t *texts, s *section) bool {
	switch {
	case f.templates == templatesExclude && s.template:
		return false
	case f.templates == templatesRestrict && !s.template:
		return false
	}
	for _, c := range f.conds {
		if !c.matches(t, s) {
			return false
		}
	}
	return true
}

func (c cond) matches(t *texts, s *section) bool {
	for _, o := range s.opts {
		if key, value := t.option(o); strings.EqualFold(key, c.name) && c.re.MatchString(value) {
			return true
		}
	}
	return false
}
