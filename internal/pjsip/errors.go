package pjsip

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, wrapped by every *Error the reader returns; check them
// with errors.Is.
var (
	// ErrSyntax is a line that is not a section header, an option, a
	// directive or a comment, or a comment that is not closed.
	ErrSyntax = errors.New("syntax error")
	// ErrInclude is an #include whose file is missing or unreadable, or an
	// #exec, which qualifyd refuses.
	ErrInclude = errors.New("include error")
	// ErrIncludeLoop is an #include of a file that is already being read.
	ErrIncludeLoop = errors.New("include loop")
	// ErrNoSection is an append to, or an inheritance from, a section that
	// does not exist earlier in the configuration.
	ErrNoSection = errors.New("no such section")
	// ErrUnknownOption is an option that Asterisk does not define for an
	// AoR (or, in a wizard, for aor/).
	ErrUnknownOption = errors.New("unknown option")
	// ErrValue is a malformed or out-of-range value.
	ErrValue = errors.New("invalid value")
	// ErrDuplicate is a second object of one type with the same name: an
	// error for AoRs, endpoints and wizards, a warning (Config.Warnings)
	// for the other types.
	ErrDuplicate = errors.New("duplicate section")
	// ErrReference is an endpoint naming a transport or an auth section
	// that does not exist; a warning (Config.Warnings).
	ErrReference = errors.New("missing reference")
	// ErrNotAsterisk is an AoR option that an unpatched Asterisk does not
	// define, so that it refuses to load the AoR (Config.NotAsterisk); not
	// an error for qualifyd.
	ErrNotAsterisk = errors.New("not an Asterisk option")
	// ErrSource is a type=source section whose list could not be read or
	// holds an object the reader refuses.
	ErrSource = errors.New("source error")
)

// Error is a configuration error at one place: the file and line, and
// where they apply the section and the option. The whole configuration is
// rejected with it (and with the other sections' errors, see Errors); a
// Config's Warnings are Errors it was loaded with.
type Error struct {
	// File is the file's name as given (the main file) or as resolved (an
	// included file).
	File string
	// Line is the 1-based line number in File.
	Line int
	// Section is the section's name, or "" outside any section.
	Section string
	// Option is the option's name as written, or "" when the error is
	// not about one option.
	Option string
	// Err is the cause; it wraps one of the sentinel errors.
	Err error
}

// Error formats the error as FILE:LINE: section "x": option "y": cause.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	if e.Section != "" {
		fmt.Fprintf(&b, "section %q: ", e.Section)
	}
	if e.Option != "" {
		fmt.Fprintf(&b, "option %q: ", e.Option)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errors returns the errors err joins: Load and Parse report up to
// MaxErrors errors of one configuration, in file order, as one error
// (errors.Join). An error that joins none is returned alone, nil as
// none.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Brief is err on one line: its first error, and how many more follow
// when it joins several.
func Brief(err error) string {
	errs := Errors(err)
	if len(errs) == 1 {
		return errs[0].Error()
	}
	return fmt.Sprintf("%v (and %d more errors; qualifyd check-config lists them)", errs[0], len(errs)-1)
}

// causef builds a cause that wraps sentinel and reads as sentinel: detail.
func causef(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// optErr is the error of one option, at the option's own place.
func optErr(sec string, v variable, err error) error {
	return &Error{File: v.file, Line: v.line, Section: sec, Option: v.key, Err: err}
}
