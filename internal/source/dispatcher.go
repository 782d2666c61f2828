package source

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qualifyd/qualifyd/internal/sink"
	"github.com/qualifyd/qualifyd/internal/sipuri"
)

// Destination is one dispatcher destination, from the list file or from
// dispatcher.list.
type Destination struct {
	// Set is the dispatcher set's number.
	Set int
	// URI is the destination's SIP URI.
	URI string
	// Disabled is the operator's D: the file's flag 4, or a state D in
	// dispatcher.list.
	Disabled bool
	// Priority is the destination's priority (0 when not given).
	Priority int
	// Attrs are the attributes as written ("duid=gw1;weight=50"), DUID
	// the duid= among them.
	Attrs, DUID string
	// File and Line say where the destination is: the list file and its
	// line, or dispatcher.list's answer and the destination's place in it.
	File string
	Line int
}

// dsDisabled is the dispatcher's flag of a disabled destination
// (DS_DISABLED_DST in Kamailio's dispatch.h).
const dsDisabled = 4

// maxLine is the longest line Kamailio reads as one: ds_load_list reads
// with fgets into 1024 bytes and takes the rest as another line.
const maxLine = 1023

// ReadDispatcherFile reads Kamailio's dispatcher list file, as Kamailio
// 5.6's ds_load_list does: one destination a line, "SETID URI [FLAGS
// [PRIORITY [ATTRS]]]" separated by blanks, lines starting with '#'
// (after blanks) and blank lines ignored, '#' after the URI, flags or
// priority a comment. Where Kamailio refuses the file (a set with no
// URI) or skips a line with a warning (a URI it cannot parse), and where
// it would misread a line (a set, flags or priority that is not a
// number, text after the attributes, a line longer than 1023 bytes),
// the whole file is refused with "NAME:LINE: ..." naming the first such
// line. Host names are not resolved.
func ReadDispatcherFile(name string, data []byte) ([]Destination, error) {
	var out []Destination
	for num, text := range lines(string(data)) {
		d, ok, err := readLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, num, err)
		}
		if ok {
			d.File, d.Line = name, num
			out = append(out, d)
		}
	}
	return out, nil
}

// lines yields each line with its 1-based number, without its "\n".
func lines(s string) func(yield func(int, string) bool) {
	return func(yield func(int, string) bool) {
		for num := 1; s != ""; num++ {
			line, rest, _ := strings.Cut(s, "\n")
			if !yield(num, line) {
				return
			}
			s = rest
		}
	}
}

// isBlank is ds_load_list's white space.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// scanner walks one line as ds_load_list does.
type scanner struct{ s string }

func (c *scanner) blanks() {
	for c.s != "" && isBlank(c.s[0]) {
		c.s = c.s[1:]
	}
}

// end reports whether the line ends here or a comment starts.
func (c *scanner) end() bool { return c.s == "" || c.s[0] == '#' }

// token takes the text up to a blank (and up to '#' when hash is set).
func (c *scanner) token(hash bool) string {
	i := 0
	for i < len(c.s) && !isBlank(c.s[i]) && !(hash && c.s[i] == '#') {
		i++
	}
	t := c.s[:i]
	c.s = c.s[i:]
	return t
}

// number takes a decimal number that must end at a blank, '#' or the
// end of the line; what names the field.
func (c *scanner) number(what string) (int, error) {
	t := c.token(true)
	n, err := strconv.ParseUint(t, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("the %s %q is not a number (Kamailio would misread the line)", what, t)
	}
	return int(n), nil
}

// readLine reads one line; ok is false for a blank line or a comment.
func readLine(text string) (d Destination, ok bool, err error) {
	if len(text) > maxLine {
		return d, false, fmt.Errorf("a line of %d bytes: Kamailio reads at most %d as one line", len(text), maxLine)
	}
	c := &scanner{text}
	if c.blanks(); c.end() {
		return d, false, nil
	}
	if d.Set, err = c.setID(); err != nil {
		return d, false, err
	}
	if c.blanks(); c.end() {
		return d, false, fmt.Errorf("set %d has no destination URI (Kamailio refuses the whole file)", d.Set)
	}
	d.URI = c.token(true)
	if err := checkURI(d.URI); err != nil {
		return d, false, err
	}
	return d, true, c.rest(&d)
}

// setID takes the set number, which Kamailio reads up to the first
// character that is not a digit, blank or not.
func (c *scanner) setID() (int, error) {
	i := 0
	for i < len(c.s) && c.s[i] >= '0' && c.s[i] <= '9' {
		i++
	}
	t := c.s[:i]
	c.s = c.s[i:]
	n, err := strconv.ParseUint(t, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("the line does not start with a set number (Kamailio would read set 0)")
	}
	return int(n), nil
}

// rest reads the optional flags, priority and attributes.
func (c *scanner) rest(d *Destination) error {
	if c.blanks(); c.end() {
		return nil
	}
	flags, err := c.number("flags field")
	if err != nil {
		return err
	}
	d.Disabled = flags&dsDisabled != 0
	if c.blanks(); c.end() {
		return nil
	}
	if d.Priority, err = c.number("priority field"); err != nil {
		return err
	}
	if c.blanks(); c.end() {
		return nil
	}
	d.Attrs = c.token(false)
	d.DUID = duid(d.Attrs)
	if c.blanks(); !c.end() {
		return fmt.Errorf("text after the attributes: %q (Kamailio ignores it)", c.s)
	}
	return nil
}

// checkURI refuses a destination Kamailio cannot add, or qualifyd
// cannot probe.
func checkURI(uri string) error {
	lower := strings.ToLower(uri)
	if !strings.HasPrefix(lower, "sip:") && !strings.HasPrefix(lower, "sips:") {
		return fmt.Errorf("destination %q is not a sip: or sips: URI (Kamailio skips the line)", uri)
	}
	if err := sipuri.Check(uri); err != nil {
		return fmt.Errorf("destination %q: %v (Kamailio skips the line)", uri, err)
	}
	if _, ok := sink.HostPort(uri); !ok {
		return fmt.Errorf("destination %q has no host and port the kamailio sink can match", uri)
	}
	return nil
}

// duid returns the duid= attribute of attrs ("name=value;..."), as
// Kamailio's parse_params, or "".
func duid(attrs string) string {
	for p := range strings.SplitSeq(attrs, ";") {
		name, value, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(name), "duid") {
			return strings.TrimSpace(value)
		}
	}
	return ""
}
