// Command packaging builds qualifyd's Debian package with nfpm, used as a
// library, from nfpm.yaml beside it, and generates the package's man pages:
// qualifyd(8) from the help of the binary it packages, qualifyd.conf(5)
// from the configuration reference, docs/configuration.md. It runs from
// this directory (make deb runs it with go -C packaging):
//
//	go run . -bin BIN -version V [-out DIR]                 write DIR/qualifyd_V_amd64.deb
//	go run . -bin BIN -version V -man FILE [-man5 FILE5]    write the man pages alone
//
// The man pages' date is $SOURCE_DATE_EPOCH when set (as nfpm's file
// times are), else today.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	bin, version, out, man, man5 string
}

// run parses args, then writes the package or the man page; it returns the
// exit code (0 ok, 1 failure, 2 usage error).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("packaging", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.bin, "bin", "", "the qualifyd binary to package and read the help of")
	fs.StringVar(&o.version, "version", "", "the package version (what the binary's --version prints)")
	fs.StringVar(&o.out, "out", ".", "directory the .deb is written to")
	fs.StringVar(&o.man, "man", "", "write the man page qualifyd(8) (roff) to this file instead of building the package")
	fs.StringVar(&o.man5, "man5", "", "with -man: write qualifyd.conf(5) (roff) to this file too")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.bin == "" || o.version == "" || fs.NArg() > 0 || (o.man5 != "" && o.man == "") {
		fmt.Fprintln(stderr, "usage: packaging -bin BIN -version V [-out DIR | -man FILE [-man5 FILE5]]")
		return 2
	}
	path, err := build(o)
	if err != nil {
		fmt.Fprintln(stderr, "packaging:", err)
		return 1
	}
	fmt.Fprintln(stdout, path)
	return 0
}

// build writes what o asks for and returns its path.
func build(o options) (string, error) {
	cmds, err := helpOf(o.bin)
	if err != nil {
		return "", err
	}
	date, err := sourceDate()
	if err != nil {
		return "", err
	}
	page := manPage(cmds, o.version, date)
	md, err := os.ReadFile(referenceFile)
	if err != nil {
		return "", err
	}
	page5, err := confManPage(md, o.version, date)
	if err != nil {
		return "", err
	}
	if o.man != "" {
		if o.man5 != "" {
			if err := os.WriteFile(o.man5, page5, 0o644); err != nil {
				return "", err
			}
		}
		return o.man, os.WriteFile(o.man, page, 0o644)
	}
	return writeDeb(o, page, page5, date)
}

// sourceDate is $SOURCE_DATE_EPOCH (seconds since 1970), else now.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(sec, 0), nil
}
