package pjsip

import (
	"fmt"
	"path/filepath"
	"strings"
)

// patchedAoROptions are the AoR options that Asterisk's res_pjsip defines
// only with contrib/asterisk's qualify patches; an unpatched Asterisk
// refuses to load an AoR that sets one.
var patchedAoROptions = map[string]bool{
	"qualify_failures":       true,
	"qualify_successes":      true,
	"qualify_retry_interval": true,
	"qualify_down_interval":  true,
	"qualify_latency_only":   true,
}

// qualifydAoROptions are qualifyd's AoR options that no Asterisk defines,
// patched or not.
var qualifydAoROptions = map[string]bool{
	"qualify_failures_min":          true,
	"qualify_failures_max":          true,
	"qualify_false_outages_per_day": true,
	"qualify_failure_window":        true,
	"qualify_success_codes":         true,
	"qualify_quiet_only":            true,
	"qualify_call_failure_codes":    true,
	"qualify_drain_max":             true,
}

// asteriskReads reports whether Asterisk reads file too: pjsip.conf,
// pjsip_wizard.conf, and the pjsip*.conf files they include by
// convention. An overlay of qualifyd's own (qualifyd.conf, which includes
// pjsip.conf and adds options to its AoRs) is not.
func asteriskReads(file string) bool {
	base := filepath.Base(file)
	return strings.HasPrefix(base, "pjsip") && strings.HasSuffix(base, ".conf")
}

// notAsterisk returns the note of an AoR (a type=aor section, or a
// wizard's aor/ options when wizard) that sets, in a file Asterisk reads
// too (asteriskReads), options an unpatched Asterisk does not define, at
// the first of them; nil when it sets none. The note names every such
// option, and whether contrib/asterisk's patches make Asterisk load the
// AoR.
func notAsterisk(s *def, wizard bool) *Error {
	var first *variable
	var patched, never []string
	for i := range s.vars {
		v := &s.vars[i]
		if !asteriskReads(v.file) {
			continue
		}
		name := v.name
		if wizard {
			var ok bool
			if name, ok = strings.CutPrefix(v.key, "aor/"); !ok {
				continue
			}
		}
		switch {
		case qualifydAoROptions[name], name == "qualify_failures" && strings.EqualFold(strings.TrimSpace(v.value), "auto"):
			never = appendOnce(never, name)
		case patchedAoROptions[name]:
			patched = appendOnce(patched, name)
		default:
			continue
		}
		if first == nil {
			first = v
		}
	}
	if first == nil {
		return nil
	}
	what := "an AoR"
	if wizard {
		what = "a wizard's AoR"
	}
	cause := fmt.Errorf("%w: Asterisk refuses to load %s that sets %s", ErrNotAsterisk, what, strings.Join(append(patched, never...), ", "))
	switch {
	case len(never) > 0:
		cause = fmt.Errorf("%w (no Asterisk defines %s, even with contrib/asterisk's qualify patches)", cause, strings.Join(never, ", "))
	default:
		cause = fmt.Errorf("%w unless it has contrib/asterisk's qualify patches", cause)
	}
	return &Error{File: first.file, Line: first.line, Section: s.name, Option: first.key, Err: cause}
}

// appendOnce appends s to list unless it is there.
func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
