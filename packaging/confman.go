package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// referenceFile is the configuration reference, the one source of
// qualifyd.conf(5) and of the docs page an operator reads.
const referenceFile = "../docs/configuration.md"

// confManPage renders qualifyd.conf(5) from the markdown of the
// configuration reference: its title line becomes the page's header, each
// "##" section a section, paragraphs, lists and code blocks as they are,
// and each table row an entry whose tag is the row's first cell, followed
// by the other cells (the drivers and the default named, then the
// meaning).
func confManPage(md []byte, version string, date time.Time) ([]byte, error) {
	lines := strings.Split(string(md), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
		return nil, fmt.Errorf("%s: no title on the first line", referenceFile)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, ".TH QUALIFYD.CONF 5 %s \"qualifyd %s\" \"File Formats\"\n", date.UTC().Format("2006-01-02"), roff(version))
	b.WriteString(".SH NAME\nqualifyd.conf \\- qualifyd's configuration file\n.SH DESCRIPTION\n")
	r := &mdRenderer{b: &b}
	for _, line := range lines[1:] {
		r.line(line)
	}
	r.flush()
	b.WriteString(".SH SEE ALSO\n.BR qualifyd (8),\n.BR asterisk (8);\nthe pages of the source's\n.I docs/\ndirectory, of which this is\n.IR docs/configuration.md .\n")
	return b.Bytes(), nil
}

// mdRenderer turns markdown lines into roff, one block at a time.
type mdRenderer struct {
	b      *bytes.Buffer
	para   []string // the paragraph or list item being read
	item   bool     // para is a list item
	fence  bool     // inside a code block
	header []string // the columns of the table being read
}

// line takes the next line of markdown.
func (r *mdRenderer) line(line string) {
	switch {
	case strings.HasPrefix(line, "```"):
		r.flush()
		if r.fence = !r.fence; r.fence {
			r.b.WriteString(".PP\n.nf\n")
		} else {
			r.b.WriteString(".fi\n")
		}
	case r.fence:
		r.b.WriteString(guard(roffText(line)) + "\n")
	case strings.HasPrefix(line, "<!--"):
	case strings.HasPrefix(line, "## "):
		r.flush()
		r.b.WriteString(".SH " + guard(roffText(strings.ToUpper(strings.ReplaceAll(linkTexts(line[3:]), "`", "")))) + "\n")
	case strings.HasPrefix(line, "### "):
		r.flush()
		r.b.WriteString(".SS " + inline(line[4:]) + "\n")
	case strings.HasPrefix(line, "|"):
		r.flushPara()
		r.row(tableCells(line))
	case strings.TrimSpace(line) == "":
		r.flush()
	case strings.HasPrefix(line, "- "):
		r.flush()
		r.para, r.item = []string{line[2:]}, true
	default:
		r.header = nil
		r.para = append(r.para, strings.TrimSpace(line))
	}
}

// row takes a table row: the first gives the columns, a "|---" row none.
func (r *mdRenderer) row(cells []string) {
	switch {
	case r.header == nil:
		r.header = cells
		return
	case strings.HasPrefix(cells[0], "---"):
		return
	}
	fmt.Fprintf(r.b, ".TP\n%s\n", inline(cells[0]))
	var named []string
	for i := 1; i < len(cells)-1 && i < len(r.header); i++ {
		if cells[i] != "" {
			named = append(named, capitalize(r.header[i])+": "+inline(cells[i])+".")
		}
	}
	if len(named) > 0 {
		r.b.WriteString(strings.Join(named, " ") + "\n.br\n")
	}
	r.b.WriteString(inline(cells[len(cells)-1]) + "\n")
}

// flush ends the paragraph, list item or table being read.
func (r *mdRenderer) flush() {
	r.flushPara()
	r.header = nil
}

// flushPara writes the paragraph or list item being read.
func (r *mdRenderer) flushPara() {
	if len(r.para) == 0 {
		return
	}
	if r.item {
		r.b.WriteString(".IP \\(bu 2\n")
	} else {
		r.b.WriteString(".PP\n")
	}
	r.b.WriteString(inline(strings.Join(r.para, " ")) + "\n")
	r.para, r.item = nil, false
}

// tableCells splits a table line into its trimmed cells; `\|` is a "|"
// inside a cell.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var out []string
	for _, c := range strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|") {
		out = append(out, strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|"))
	}
	return out
}

// Inline markdown: code, links, bold and italics.
var (
	mdCode   = regexp.MustCompile("`([^`]*)`")
	mdLink   = regexp.MustCompile(`^\[([^\]]*)\]\([^)\s]*\)`)
	mdBold   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	mdItalic = regexp.MustCompile(`\*([^*\s][^*]*)\*`)
)

// inline renders a line of markdown text as roff: code in bold, links as
// their text, bold and italics, the rest escaped.
func inline(s string) string {
	s = linkTexts(s)
	var out strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 {
			out.WriteString(`\fB` + roffText(part) + `\fR`)
			continue
		}
		part = roffText(part)
		part = mdBold.ReplaceAllString(part, `\fB$1\fR`)
		part = mdItalic.ReplaceAllString(part, `\fI$1\fR`)
		out.WriteString(part)
	}
	return guard(out.String())
}

// linkTexts replaces each link outside code by its text.
func linkTexts(s string) string {
	var out strings.Builder
	code := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			code = !code
		case c == '[' && !code:
			if m := mdLink.FindStringSubmatchIndex(s[i:]); m != nil {
				out.WriteString(s[i+m[2] : i+m[3]])
				i += m[1] - 1
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// roffText escapes text within a line: backslashes and minus signs.
func roffText(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// guard keeps a rendered line's leading "." or "'" from being read as a
// request.
func guard(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}

// capitalize upper-cases the first letter of a column's name.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
