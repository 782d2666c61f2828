// Package pjsip reads Asterisk's pjsip.conf and pjsip_wizard.conf as
// Asterisk does, and turns them into typed AoR and endpoint definitions for
// qualifyd: each AoR's static contacts, its qualify.Policy and the
// probe.Options that shape its OPTIONS.
//
// qualifyd's own options (qualify_failures and the others of
// docs/qualify-semantics.md §2) live in qualifyd's file, which includes
// the PBX's files and appends to their sections:
//
//	#include "/etc/asterisk/pjsip.conf"
//	[pbx07](+type=aor)
//	qualify_failures=3
//	qualify_retry_interval=2
//
// # Syntax
//
// The reader follows Asterisk's main/config.c:
//   - "[name]", templates "[name](!)", inheritance "[name](a,b)" from
//     templates or sections (a copy of their options at that point, before
//     the section's own), combined forms such as "[name](!,a)", appends
//     "[name](+)" and filtered appends "[name](+type=aor)", which add to the
//     first earlier non-template section of that name (case-insensitive)
//     whose options match every name=regex condition (joined by '&';
//     values are unanchored POSIX extended regular expressions).
//   - "key = value", "key => value", and "key += value", which appends to
//     the last value of key. A key given several times accumulates; for
//     single-valued options the last wins. A leading '\' escapes the
//     key's first character.
//   - Comments: ';' to the end of the line, "\;" for a literal ';', and
//     ";-- ... --;" blocks, which nest and span lines.
//   - "#include" and "#tryinclude", with the file quoted ("" or <>) or not,
//     and glob patterns (sorted). Relative paths resolve against the
//     configuration directory (Options.ConfigDir; by default the main
//     file's directory), never the including file's. An included file
//     starts in the includer's current section.
//   - Several sections may share a name with different type= values.
//
// # Objects
//
// A section's type is its first type= value. type=aor is read in full: every
// option Asterisk defines for an AoR is accepted and checked, and any other
// is an error. type=endpoint (aors, outbound_auth, outbound_proxy,
// transport, from_user, from_domain), type=auth (username, password,
// realm), type=transport (protocol) and type=global
// (max_initial_qualify_time, and qualifyd's panic_threshold,
// panic_min_destinations and panic_hold_threshold) are read for what qualifyd needs; their
// other options are ignored. type=wizard creates an AoR and an endpoint
// named after the section, as res_pjsip_config_wizard: contacts from
// remote_hosts through contact_pattern unless aor/contact is given,
// aor/... options as AoR options (qualifyd's included), endpoint/... and,
// with sends_auth, outbound_auth/... likewise. type=sink is qualifyd's
// own (sink.go): a router that qualifyd keeps in step with its verdicts,
// read in full (unknown options are errors). Sections of other types, and
// sections without a type, are ignored.
//
// # Deliberate differences from Asterisk
//
//   - Where Asterisk logs a warning and carries on, qualifyd rejects the
//     file: a line without '=', an option without a name, an unknown
//     directive, an unclosed ";--" comment, a "--;" that closes nothing
//     (Asterisk then silently drops the rest of the file), an included
//     path that is not a regular file.
//   - #exec is always refused.
//   - A boolean that is neither true (yes, true, y, t, 1, on) nor false (no,
//     false, n, f, 0, off) is an error; Asterisk takes it as false.
//   - An inheritance from an empty name "[x](a,)" is an error (Asterisk
//     inherits from the first section of the file); a section inheriting
//     from itself is a copy, bounded at 65536 options (Asterisk loops).
//   - Two AoRs, endpoints or wizards with one name are an error: Asterisk
//     would load none of that type. A contact URI or outbound proxy the
//     prober can never use (a port outside 1-65535 or empty, a host that
//     is neither an IP address nor a host name, a transport parameter
//     other than udp, tcp or tls) is an error; Asterisk accepts it and
//     fails each request.
//   - Glob braces {a,b} are not expanded; in a wizard only ${REMOTE_HOST}
//     is substituted (any other ${...} is an error), and the last value of
//     each wizard option wins, as in current Asterisk.
//   - qualify_timeout <= 0 is stored as 0, the SIP transaction timeout;
//     numbers in hexadecimal float form, infinities and NaN are refused.
//
// # Warnings
//
// Where Asterisk loads the file and logs, qualifyd loads it too and
// returns a warning (Config.Warnings), naming file and line:
//   - A second object of one name in a type other than aor, endpoint and
//     wizard (two [acl] of type=acl, two transports): Asterisk's
//     res_sorcery_config loads no object of that type from the file, and
//     qualifyd forgets the transports, auths or global of such a type.
//   - An endpoint listing an AoR whose transport or first outbound_auth
//     is not defined: Asterisk looks them up only when it sends. Without
//     its transport, the request goes by the contact URI alone (udp
//     unless the URI says transport= or sips:); without its auth, a
//     challenge is not answered. qualifyd probes the same way and says so
//     in the failure's detail (probe.Options.Unresolved).
//
// Integers are read as Asterisk reads unsigned integers (strtoul, base 0):
// "0x1e" is hexadecimal and a leading 0 octal. Every error is an *Error,
// "FILE:LINE: section "x": option "y": ...", wrapping one of the sentinel
// errors. A section's error does not stop the others being read: a file
// is refused with up to MaxErrors of them, joined (Errors lists them).
package pjsip
