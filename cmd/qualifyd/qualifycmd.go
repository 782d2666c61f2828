package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/asterisk"
)

// runQualify is `qualifyd qualify AOR`: probe the AoR's contacts now through
// the running daemon and print one line per contact; exit 0 when every
// contact answered, 1 otherwise.
func runQualify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, pos, code := parseClient("qualify", "AOR [--http ADDR] [--token-file FILE]", args, stderr,
		func(pos []string) bool { return len(pos) == 1 })
	if c == nil {
		return code
	}
	var res api.Qualify
	if err := c.do(ctx, "POST", "/api/v1/aors/"+url.PathEscape(pos[0])+"/qualify", &res); err != nil {
		fmt.Fprintln(stderr, "qualifyd qualify:", err)
		return 1
	}
	return printQualify(stdout, res)
}

// printQualify prints the results and returns the exit code.
func printQualify(w io.Writer, res api.Qualify) int {
	code := 0
	for _, r := range res.Results {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%s/%s: %s\n", res.AoR, r.URI, r.Error)
			code = 1
		case r.OK:
			fmt.Fprintf(w, "%s/%s: %s, status %d, RTT %s msec\n", res.AoR, r.URI, r.Status, r.Code,
				asterisk.Msec(time.Duration(r.RTTUsec)*time.Microsecond))
		default:
			fmt.Fprintf(w, "%s/%s: qualify failed (%s), status now %s\n", res.AoR, r.URI, r.Reason, r.Status)
			code = 1
		}
	}
	return code
}
