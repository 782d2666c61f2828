package pjsip

import "strings"

// maxNestedComments is Asterisk's MAX_NESTED_COMMENTS.
const maxNestedComments = 128

// blanks are the characters Asterisk's ast_strip removes (C isspace).
const blanks = " \t\n\v\f\r"

// line is one line of a file with its comments removed and its blanks
// stripped, as config_text_file_load hands it to process_text_line.
type line struct {
	num  int
	text string
	// off is where text starts in the file, or -1 when a comment was cut
	// from its middle, which makes it no substring of the file.
	off int
}

// lexer removes comments line by line. Block comments nest and span lines,
// so it carries their depth, and where each open one began, across lines.
type lexer struct {
	file   string
	opened []int
}

// checkComments lexes all of src and returns its first comment error, so
// that a file's comment errors come before the errors of its lines.
func checkComments(file, src string) error {
	return eachLine(file, src, func(line) error { return nil })
}

// eachLine calls f with each non-empty line of src, comments removed: ';'
// to the end of the line, ";-- ... --;" blocks (nesting, spanning lines),
// and "\;" for a literal semicolon, exactly as Asterisk's config.c. A
// line's text is a substring of src unless a comment was cut from its
// middle. Lines are handed over one at a time rather than kept: a
// million-AoR file has five million of them.
func eachLine(file, src string, f func(line) error) error {
	lx := lexer{file: file}
	for num, pos := 1, 0; pos < len(src); num++ {
		raw, _, _ := strings.Cut(src[pos:], "\n")
		text, at, err := lx.strip(raw, num)
		if err != nil {
			return err
		}
		trimmed := trimBlanks(text)
		if at >= 0 {
			at += pos + leadingBlanks(text)
		}
		pos += len(raw) + 1
		if trimmed != "" {
			if err := f(line{num: num, text: trimmed, off: at}); err != nil {
				return err
			}
		}
	}
	if len(lx.opened) > 0 {
		return lx.err(lx.opened[0], "block comment \";--\" is never closed with \"--;\"")
	}
	return nil
}

func (lx *lexer) err(num int, msg string) error {
	return &Error{File: lx.file, Line: num, Err: causef(ErrSyntax, "%s", msg)}
}

// strip returns the parts of s outside comments, and where they start in
// s when they are one part (-1 when joined). It scans from ';' to ';'
// as config.c does: an escaped one is kept (without its backslash), ";--"
// (not ";---") opens a block, "--;" closes one, and any other ends the
// line's processing unless inside a block.
func (lx *lexer) strip(s string, num int) (string, int, error) {
	var keep kept
	seg, i := 0, 0 // start of the kept segment; where the scan resumes
	for {
		j := strings.IndexByte(s[i:], ';')
		if j < 0 {
			break
		}
		p := i + j
		switch {
		case p > i && s[p-1] == '\\':
			if len(lx.opened) == 0 {
				keep.add(s[seg:p-1], seg)
				seg = p
			}
			i = p + 1
		case strings.HasPrefix(s[p:], ";--") && !strings.HasPrefix(s[p:], ";---"):
			if err := lx.open(&keep, s[seg:p], seg, num); err != nil {
				return "", 0, err
			}
			i = p + 3
		case p >= i+2 && s[p-2:p] == "--":
			if len(lx.opened) == 0 {
				return "", 0, lx.err(num, "\"--;\" closes no block comment")
			}
			lx.opened = lx.opened[:len(lx.opened)-1]
			i, seg = p+1, p+1
		case len(lx.opened) == 0:
			keep.add(s[seg:p], seg)
			return keep.result()
		default:
			i = p + 1
		}
	}
	if len(lx.opened) == 0 {
		keep.add(s[seg:], seg)
	}
	return keep.result()
}

// open starts a block comment, keeping the text before it (at at) when
// it is the outermost one.
func (lx *lexer) open(keep *kept, before string, at, num int) error {
	if len(lx.opened) >= maxNestedComments {
		return lx.err(num, "block comments nested too deeply")
	}
	if len(lx.opened) == 0 {
		keep.add(before, at)
	}
	lx.opened = append(lx.opened, num)
	return nil
}

// kept joins the parts of a line outside comments. A line of one part,
// as most are, is that part itself, not a copy.
type kept struct {
	one    string
	at     int // where one starts in the line
	joined strings.Builder
	many   bool
}

// add adds part, which starts at at in the line.
func (k *kept) add(part string, at int) {
	switch {
	case part == "":
	case k.many:
		k.joined.WriteString(part)
	case k.one == "":
		k.one, k.at = part, at
	default:
		k.joined.WriteString(k.one)
		k.joined.WriteString(part)
		k.many = true
	}
}

// result returns the line's text and where it starts in the line, -1
// when it is joined from several parts.
func (k *kept) result() (string, int, error) {
	if k.many {
		return k.joined.String(), -1, nil
	}
	return k.one, k.at, nil
}
