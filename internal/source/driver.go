package source

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// Driver reads one source's list.
type Driver interface {
	// Read reads the list once, changing nothing in the router, and
	// returns the objects it imports. A driver for a database of PJSIP
	// objects returns AoRs, endpoints and auths; the dispatcher drivers
	// return AoRs.
	Read(ctx context.Context) ([]pjsip.Object, error)
}

// New returns the driver of s.
func New(s *pjsip.Source) (Driver, error) {
	switch s.Driver {
	case "kamailio":
		return &kamailio{src: s, k: &sink.Kamailio{URL: s.URL, Timeout: s.Timeout}}, nil
	case "dispatcher_file":
		return &file{src: s}, nil
	case "realtime":
		return newRealtime(s)
	}
	return nil, fmt.Errorf("source %q: driver must be kamailio, dispatcher_file or realtime", s.Name)
}

// kamailio reads dispatcher.list over JSON-RPC.
type kamailio struct {
	src *pjsip.Source
	k   *sink.Kamailio
}

func (d *kamailio) Read(ctx context.Context) ([]pjsip.Object, error) {
	list, err := d.k.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	ds := make([]Destination, len(list))
	where := d.src.URL + " dispatcher.list"
	for i, x := range list {
		ds[i] = Destination{Set: x.Set, URI: x.URI, Disabled: x.Disabled(), Priority: x.Priority,
			Attrs: x.Attrs, DUID: x.DUID, File: where, Line: i + 1}
		if err := checkURI(x.URI); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", where, i+1, err)
		}
	}
	return Objects(d.src, ds)
}

// file reads Kamailio's dispatcher list file.
type file struct{ src *pjsip.Source }

// maxFile bounds the list file: 100,000 destinations are about 6 MB.
const maxFile = 64 << 20

func (d *file) Read(context.Context) ([]pjsip.Object, error) {
	data, err := readBounded(d.src.Path)
	if err != nil {
		return nil, err
	}
	ds, err := ReadDispatcherFile(d.src.Path, data)
	if err != nil {
		return nil, err
	}
	return Objects(d.src, ds)
}

func readBounded(name string) ([]byte, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || info.Size() > maxFile {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", name, maxFile)
	}
	return os.ReadFile(name)
}

// Objects turns the destinations of the source's sets into AoRs: one per
// destination that is not disabled, named by its duid or
// ds<SET>-<host>-<port>, with its URI as the one contact.
func Objects(s *pjsip.Source, ds []Destination) ([]pjsip.Object, error) {
	out := []pjsip.Object{}
	for _, d := range ds {
		if d.Disabled || !s.Wants(d.Set) {
			continue
		}
		name, err := Name(d)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", d.File, d.Line, err)
		}
		out = append(out, pjsip.Object{Type: "aor", Name: name, File: d.File, Line: d.Line,
			Options: []pjsip.KeyValue{{Key: "contact", Value: d.URI}}})
	}
	return out, nil
}

// Name is the AoR a destination becomes: its duid, else
// ds<SET>-<host>-<port> (an IPv6 host without its brackets).
func Name(d Destination) (string, error) {
	if d.DUID != "" {
		return d.DUID, nil
	}
	hp, ok := sink.HostPort(d.URI)
	if !ok {
		return "", fmt.Errorf("destination %q has no host and port", d.URI)
	}
	i := strings.LastIndexByte(hp, ':')
	host := strings.Trim(hp[:i], "[]")
	return "ds" + strconv.Itoa(d.Set) + "-" + host + "-" + hp[i+1:], nil
}
