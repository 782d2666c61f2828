package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"time"
)

// manPage renders qualifyd(8): fixed sections around one subsection per
// command, each made of that command's own help, so the page lists exactly
// the commands and flags the binary has.
func manPage(cmds []command, version string, date time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, ".TH QUALIFYD 8 %s \"qualifyd %s\" \"System Administration\"\n", date.UTC().Format("2006-01-02"), roff(version))
	b.WriteString(manHead)
	for _, c := range cmds {
		writeCommand(&b, c)
	}
	b.WriteString(manTail)
	return b.Bytes()
}

// writeCommand writes c's subsection: its summary, usage lines and flags.
func writeCommand(b *bytes.Buffer, c command) {
	fmt.Fprintf(b, ".SS %s\n%s\n", roff(c.Name), roff(c.Summary))
	usage := c.Usage
	if len(usage) == 0 {
		usage = []string{"qualifyd " + c.Name + optionsIf(len(c.Flags) > 0)}
	}
	b.WriteString(".PP\n.nf\n")
	for _, u := range usage {
		b.WriteString(roff(u) + "\n")
	}
	b.WriteString(".fi\n")
	for _, t := range c.Text {
		b.WriteString(".PP\n" + roff(t) + "\n")
	}
	for _, f := range c.Flags {
		fmt.Fprintf(b, ".TP\n\\fB\\-\\-%s\\fR", roff(f.Name))
		if f.Arg != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", roff(f.Arg))
		}
		b.WriteString("\n" + roff(f.Desc) + "\n")
	}
}

func optionsIf(ok bool) string {
	if ok {
		return " [options]"
	}
	return ""
}

// roff escapes text for a roff line: backslashes and minus signs (options
// must stay ASCII hyphen-minus when copied), and a leading control
// character.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// gzipPage compresses a man page as Debian ships them: at the best level,
// without a file name or time in the header, so equal pages give equal
// bytes.
func gzipPage(page []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(page); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// manHead is the page up to the commands' subsections.
const manHead = `.SH NAME
qualifyd \- SIP OPTIONS qualify daemon
.SH SYNOPSIS
.B qualifyd
.I COMMAND
.RI [ options ]
.br
.B qualifyd \-\-version
.SH DESCRIPTION
.B qualifyd
reads Asterisk's
.I pjsip.conf
and qualifies its contacts the way Asterisk does, with SIP OPTIONS requests,
plus what operators of PBX\-to\-PBX trunks need:
.B qualify_failures
(consecutive failures before a contact is Unreachable),
.B qualify_retry_interval
(a fast retry while a contact is failing),
.B qualify_down_interval
and
.B qualify_successes
(how a contact that is down is probed and brought back) and
.B qualify_latency_only
(measure, never take the contact out of service).
With none of them set it behaves as Asterisk and prints Asterisk's log lines.
Its verdicts are served over an HTTP API, an event stream, Prometheus metrics
and a status page.
.PP
Flags may follow the positional arguments;
.B \-\-
ends the flags, and
.B \-h
prints a command's flags. Each flag is written here with two dashes; one dash
works as well.
.SH COMMANDS
`

// manTail is the page after the commands' subsections.
const manTail = `.SH FILES
.TP
.I /etc/qualifyd/qualifyd.conf
qualifyd's configuration, in pjsip.conf syntax; it may
.B #include
the PBX's files, as
.IR /etc/asterisk/pjsip.conf .
.TP
.I /etc/qualifyd/token
The bearer token of the API's write routes, written at installation
(mode 0600); the unit hands it to the service as a credential.
.TP
.I /var/lib/qualifyd/state
The state file: every contact's status, counters and last result, kept
across restarts.
.TP
.I /lib/systemd/system/qualifyd.service
The systemd unit; the package neither enables nor starts it.
.SH SIGNALS
.B SIGHUP
makes
.B qualifyd run
re\-read its configuration; a broken file keeps the running one.
.B SIGINT
and
.B SIGTERM
stop it gracefully.
.SH EXIT STATUS
0 on success, 1 on a failure (a contact that did not answer, an invalid
configuration, an error), 2 on a usage error.
.SH SEE ALSO
.BR qualifyd.conf (5),
.BR asterisk (8),
.BR systemctl (1),
.BR systemd.exec (5);
the pages of the source's
.I docs/
directory, which document the configuration, the routers, the cluster, the
API and the metrics.
`
