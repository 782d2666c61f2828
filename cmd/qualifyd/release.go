package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/sink"
	"github.com/qualifyd/qualifyd/internal/state"
)

// releaseSynopsis is `qualifyd release`'s usage line.
const releaseSynopsis = "release [--config FILE] [--config-dir DIR] [--state-file FILE] [SINK...]"

// defaultConfig is the Debian package's configuration file.
const defaultConfig = "/etc/qualifyd/qualifyd.conf"

// runRelease is "qualifyd release [--config FILE] [--config-dir DIR]
// [--state-file FILE] [SINK...]": it pushes up every object of the named
// sinks (every sink without names) and exits, for uninstalling qualifyd
// or taking it out of service, so that no router keeps a Down that
// nothing will lift. The objects down in the state file go first. It
// prints one line per sink; 0 when every router confirmed every object,
// 1 otherwise, 2 on a usage error.
func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", defaultConfig, "qualifyd's configuration, whose sinks are released")
	dir := fs.String("config-dir", "", "directory relative #include paths resolve against (default: the config file's directory)")
	stateFile := fs.String("state-file", "", "the daemon's state file: the objects down in it are sent first (default: none, any order)")
	fs.Usage = usageFunc(fs, releaseSynopsis)
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return usageExit(err)
	}
	conf, err := pjsip.Load(*config, pjsip.Options{ConfigDir: *dir})
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd release: %v\n", pjsip.Brief(err))
		return 1
	}
	out, err := sink.Release(ctx, conf, names, sink.Config{Source: savedLevels(*stateFile, stderr)})
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd release: %v\n", err)
		return 2
	}
	return writeReleased(stdout, stderr, out)
}

// savedLevels reads the state file at path for the order of a release:
// nil without a path, or when the file cannot be read (said on stderr,
// and the release goes on in any order).
func savedLevels(path string, stderr io.Writer) sink.Source {
	if path == "" {
		return nil
	}
	f, err := state.Read(path)
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd release: state file ignored: %v: sending in any order\n", err)
		return nil
	}
	return sink.NewSaved(f.Contacts)
}

// writeReleased prints each sink's result: on stdout when every object
// was confirmed, else on stderr, which makes the exit code 1.
func writeReleased(stdout, stderr io.Writer, out []sink.Released) int {
	code := 0
	for _, r := range out {
		head := fmt.Sprintf("sink %s (%s): released %d of %d %s", r.Name, r.Driver, r.Released, r.Objects, plural(r.Objects, "object"))
		if r.Downs > 0 {
			head += fmt.Sprintf(", %d down first", r.Downs)
		}
		if r.Err != nil {
			fmt.Fprintf(stderr, "qualifyd release: %s: %v\n", head, r.Err)
			code = 1
			continue
		}
		fmt.Fprintln(stdout, head)
	}
	return code
}
