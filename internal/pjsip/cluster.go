package pjsip

import (
	"errors"
	"fmt"
	"strings"
)

// Cluster is the type=cluster section of qualifyd's own file, kept raw:
// its options are the cluster package's, which the daemon applies (so
// that this package links no NATS). Asterisk never reads it. There is at
// most one.
type Cluster struct {
	// Name is the section's name; File and Line locate its header.
	Name string
	File string
	Line int
	// Options are the section's options but type=, in file order.
	Options []ClusterOption
}

// ClusterOption is one option of the cluster section, where it is
// written.
type ClusterOption struct {
	Key, Value string
	File       string
	Line       int
}

// addCluster keeps the type=cluster section; a second one is an error
// naming the first.
func (b *builder) addCluster(s *def) error {
	if b.cluster != nil {
		return &Error{File: s.file, Line: s.line, Section: s.name, Err: causef(ErrDuplicate,
			"a second cluster section (the first, %q, is at %s:%d): a file has at most one", b.cluster.Name, b.cluster.File, b.cluster.Line)}
	}
	c := &Cluster{Name: strings.Clone(s.name), File: s.file, Line: s.line}
	for _, v := range s.vars {
		if v.name == "type" {
			continue
		}
		c.Options = append(c.Options, ClusterOption{Key: strings.Clone(v.key), Value: strings.Clone(v.value), File: v.file, Line: v.line})
	}
	b.cluster = c
	return nil
}

// OptionError is the error of the cluster section's option o: err's text
// at o's place, wrapping ErrUnknownOption when unknown wraps err, else
// ErrValue. err's text starts with its own sentinel's (the cluster
// package's "unknown option" or "invalid value"), which this package's
// replaces.
func (c *Cluster) OptionError(o ClusterOption, err, unknown error) error {
	return &Error{File: o.File, Line: o.Line, Section: c.Name, Option: o.Key, Err: rewrap(err, unknown)}
}

// SectionError is an error of the section as a whole (Finish's), at its
// header.
func (c *Cluster) SectionError(err, unknown error) error {
	return &Error{File: c.File, Line: c.Line, Section: c.Name, Err: rewrap(err, unknown)}
}

// rewrap returns err's detail wrapping ErrUnknownOption when unknown
// wraps err, else ErrValue.
func rewrap(err, unknown error) error {
	sentinel := ErrValue
	if errors.Is(err, unknown) {
		sentinel = ErrUnknownOption
	}
	detail := err.Error()
	if _, rest, ok := strings.Cut(detail, ": "); ok && strings.HasPrefix(detail, sentinel.Error()) {
		detail = rest
	}
	return fmt.Errorf("%w: %s", sentinel, detail)
}
