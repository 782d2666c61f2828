package main

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"time"
)

// debianChangelog renders version's section of the project's CHANGELOG.md
// (Keep a Changelog: "## [VERSION]", "### Added", "- " items with
// continuation lines indented two spaces) as one entry of a Debian
// changelog, the package's /usr/share/doc/qualifyd/changelog.gz. A version
// the file has no section for takes the [Unreleased] one.
func debianChangelog(md []byte, version, maintainer string, date time.Time) ([]byte, error) {
	lines := section(md, version)
	if lines == nil {
		lines = section(md, "Unreleased")
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no section [%s] or [Unreleased]", version)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "qualifyd (%s) unstable; urgency=medium\n\n", version)
	var item []string
	flush := func() {
		if item != nil {
			wrap(&b, strings.Join(item, " "), "  * ", "    ", 79)
			item = nil
		}
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "### "):
			flush()
			fmt.Fprintf(&b, "  [ %s ]\n", strings.TrimPrefix(l, "### "))
		case strings.HasPrefix(l, "- "):
			flush()
			item = []string{strings.TrimPrefix(l, "- ")}
		case strings.HasPrefix(l, "  ") && item != nil:
			item = append(item, strings.TrimSpace(l))
		}
	}
	flush()
	fmt.Fprintf(&b, "\n -- %s  %s\n", maintainer, date.UTC().Format(time.RFC1123Z))
	return b.Bytes(), nil
}

// wrap writes text's words in lines of at most width bytes (a longer word
// has a line of its own), the first line starting with first, the others
// with rest.
func wrap(b *bytes.Buffer, text, first, rest string, width int) {
	line := first
	for i, w := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = rest + w
			continue
		}
		if i > 0 {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
}

// section is the lines under "## [name]" up to the next "## " heading or
// link definitions, or nil when there is no such heading.
func section(md []byte, name string) []string {
	var lines []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "## "):
			in = strings.HasPrefix(l, "## ["+name+"]")
			if in && lines == nil {
				lines = []string{}
			}
		case strings.HasPrefix(l, "["):
			in = false
		case in && strings.TrimSpace(l) != "":
			lines = append(lines, l)
		}
	}
	return lines
}
