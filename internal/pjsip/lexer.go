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
}

// lexer removes comments line by line. Block comments nest and span lines,
// so it carries their depth, and where each open one began, across lines.
type lexer struct {
	file   string
	opened []int
}

// checkComments lexes all of src and returns its first comment error, so
// that a file's comment errors come before the errors of its lines, as
// when the reader kept every line of the file (issue 7).
func checkComments(file, src string) error {
	return eachLine(file, src, func(line) error { return nil })
}

// eachLine calls f with each non-empty line of src, comments removed: ';'
// to the end of the line, ";-- ... --;" blocks (nesting, spanning lines),
// and "\;" for a literal semicolon, exactly as Asterisk's config.c. A
// line's text is a substring of src unless a comment was cut from its
// middle. Lines are handed over one at a time rather than kept: a
// million-AoR file has five million of them (issue 7).
func eachLine(file, src string, f func(line) error) error {
	lx := lexer{file: file}
	for num := 1; src != ""; num++ {
		raw, rest, _ := strings.Cut(src, "\n")
		src = rest
		text, err := lx.strip(raw, num)
		if err != nil {
			return err
		}
		if text = trimBlanks(text); text != "" {
			if err := f(line{num: num, text: text}); err != nil {
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

// strip returns the parts of s outside comments. It scans from ';' to ';'
// as config.c does: an escaped one is kept (without its backslash), ";--"
// (not ";---") opens a block, "--;" closes one, and any other ends the
// line's processing unless inside a block.
func (lx *lexer) strip(s string, num int) (string, error) {
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
				keep.add(s[seg : p-1])
				seg = p
			}
			i = p + 1
		case strings.HasPrefix(s[p:], ";--") && !strings.HasPrefix(s[p:], ";---"):
			if err := lx.open(&keep, s[seg:p], num); err != nil {
				return "", err
			}
			i = p + 3
		case p >= i+2 && s[p-2:p] == "--":
			if len(lx.opened) == 0 {
				return "", lx.err(num, "\"--;\" closes no block comment")
			}
			lx.opened = lx.opened[:len(lx.opened)-1]
			i, seg = p+1, p+1
		case len(lx.opened) == 0:
			keep.add(s[seg:p])
			return keep.String(), nil
		default:
			i = p + 1
		}
	}
	if len(lx.opened) == 0 {
		keep.add(s[seg:])
	}
	return keep.String(), nil
}

// open starts a block comment, keeping the text before it when it is the
// outermost one.
func (lx *lexer) open(keep *kept, before string, num int) error {
	if len(lx.opened) >= maxNestedComments {
		return lx.err(num, "block comments nested too deeply")
	}
	if len(lx.opened) == 0 {
		keep.add(before)
	}
	lx.opened = append(lx.opened, num)
	return nil
}

// kept joins the parts of a line outside comments. A line of one part,
// as most are, is that part itself, not a copy.
type kept struct {
	one    string
	joined strings.Builder
	many   bool
}

func (k *kept) add(part string) {
	switch {
	case part == "":
	case k.many:
		k.joined.WriteString(part)
	case k.one == "":
		k.one = part
	default:
		k.joined.WriteString(k.one)
		k.joined.WriteString(part)
		k.many = true
	}
}

func (k *kept) String() string {
	if k.many {
		return k.joined.String()
	}
	return k.one
}
