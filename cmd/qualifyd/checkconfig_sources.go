package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/source"
)

// sourceRead is what check-config --connect read of one source.
type sourceRead struct {
	src  *pjsip.Source
	objs []pjsip.Object
}

// readSources is the importer of check-config --connect: each source
// read once with its driver, changing nothing, its list recorded.
func readSources(ctx context.Context, reads *[]sourceRead) pjsip.Importer {
	return func(src *pjsip.Source) ([]pjsip.Object, error) {
		d, err := source.New(src)
		if err != nil {
			return nil, err
		}
		objs, err := d.Read(ctx)
		if err != nil {
			return nil, err
		}
		*reads = append(*reads, sourceRead{src, objs})
		return objs, nil
	}
}

// secretOptions are the imported options printed as a placeholder: an
// auth's password (from a realtime database's ps_auths).
var secretOptions = map[string]bool{"password": true}

// writeSources prints one line per source and one per object it
// imports: its type, name and options, a password as "(secret)".
func writeSources(stdout io.Writer, reads []sourceRead) {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	for _, r := range reads {
		fmt.Fprintf(w, "source %s (%s): OK: imports %d %s\n", r.src.Name, r.src.Driver, len(r.objs), plural(len(r.objs), "object"))
		for _, o := range r.objs {
			fmt.Fprintf(w, "  %s %s", o.Type, o.Name)
			for _, kv := range o.Options {
				v := kv.Value
				if secretOptions[kv.Key] {
					v = pjsip.Secret(v).String()
				}
				fmt.Fprintf(w, " %s=%s", kv.Key, v)
			}
			w.WriteByte('\n')
		}
	}
}
