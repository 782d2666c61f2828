package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// releaseSynopsis is `qualifyd release`'s usage line.
const releaseSynopsis = "release [--config FILE] [--config-dir DIR] [SINK...]"

// defaultConfig is the Debian package's configuration file.
const defaultConfig = "/etc/qualifyd/qualifyd.conf"

// runRelease is "qualifyd release [--config FILE] [--config-dir DIR]
// [SINK...]": it pushes up every object of the named sinks (every sink
// without names) and exits, for uninstalling qualifyd or taking it out of
// service, so that no router keeps a Down that nothing will lift. It
// prints one line per sink; 0 when every router confirmed every object,
// 1 otherwise, 2 on a usage error.
func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", defaultConfig, "qualifyd's configuration, whose sinks are released")
	dir := fs.String("config-dir", "", "directory relative #include paths resolve against (default: the config file's directory)")
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
	out, err := sink.Release(ctx, conf, names, sink.Config{})
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd release: %v\n", err)
		return 2
	}
	return writeReleased(stdout, stderr, out)
}

// writeReleased prints each sink's result: on stdout when every object
// was confirmed, else on stderr, which makes the exit code 1.
func writeReleased(stdout, stderr io.Writer, out []sink.Released) int {
	code := 0
	for _, r := range out {
		head := fmt.Sprintf("sink %s (%s): released %d of %d %s", r.Name, r.Driver, r.Released, r.Objects, plural(r.Objects, "object"))
		if r.Err != nil {
			fmt.Fprintf(stderr, "qualifyd release: %s: %v\n", head, r.Err)
			code = 1
			continue
		}
		fmt.Fprintln(stdout, head)
	}
	return code
}
