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

// lex splits src into its non-empty lines with comments removed: ';' to the
// end of the line, ";-- ... --;" blocks (nesting, spanning lines), and "\;"
// for a literal semicolon, exactly as Asterisk's config.c.
func lex(file string, src []byte) ([]line, error) {
	lx := lexer{file: file}
	var out []line
	for i, raw := range strings.Split(string(src), "\n") {
		text, err := lx.strip(raw, i+1)
		if err != nil {
			return nil, err
		}
		if text = strings.Trim(text, blanks); text != "" {
			out = append(out, line{num: i + 1, text: text})
		}
	}
	if len(lx.opened) > 0 {
		return nil, lx.err(lx.opened[0], "block comment \";--\" is never closed with \"--;\"")
	}
	return out, nil
}

func (lx *lexer) err(num int, msg string) error {
	return &Error{File: lx.file, Line: num, Err: causef(ErrSyntax, "%s", msg)}
}

// strip returns the parts of s outside comments. It scans from ';' to ';'
// as config.c does: an escaped one is kept (without its backslash), ";--"
// (not ";---") opens a block, "--;" closes one, and any other ends the
// line's processing unless inside a block.
func (lx *lexer) strip(s string, num int) (string, error) {
	var keep strings.Builder
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
				keep.WriteString(s[seg : p-1])
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
			keep.WriteString(s[seg:p])
			return keep.String(), nil
		default:
			i = p + 1
		}
	}
	if len(lx.opened) == 0 {
		keep.WriteString(s[seg:])
	}
	return keep.String(), nil
}

// open starts a block comment, keeping the text before it when it is the
// outermost one.
func (lx *lexer) open(keep *strings.Builder, before string, num int) error {
	if len(lx.opened) >= maxNestedComments {
		return lx.err(num, "block comments nested too deeply")
	}
	if len(lx.opened) == 0 {
		keep.WriteString(before)
	}
	lx.opened = append(lx.opened, num)
	return nil
}
