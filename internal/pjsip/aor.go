package pjsip

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// AoR is one address of record (a type=aor section, or the AoR a wizard
// creates) with its static contacts and effective options, as the engine
// applies it (probe.AoR, embedded so that the daemon hands the engine
// these AoRs instead of a copy), and where it was defined:
//   - Name is the section's name.
//   - Contacts are the static contact URIs (contact=), in order, without
//     duplicates. Empty for an AoR whose contacts register dynamically.
//   - Policy holds the qualify_* options; unset ones have Asterisk's
//     defaults (qualify.DefaultPolicy).
//   - Probe shapes the OPTIONS: the AoR's outbound_proxy (else the
//     endpoint's), and the transport protocol, From and credentials of the
//     first endpoint, in file order, that lists this AoR in aors=.
type AoR struct {
	probe.AoR
	// File and Line locate the section's header (the wizard's for a wizard
	// AoR).
	File string
	Line int
}

// aorOption applies one option's value to an AoR.
type aorOption func(a *AoR, value string) error

// aorOptions are all the options Asterisk defines for an AoR (location.c),
// plus qualifyd's; any other is an error. Those qualifyd does not use are
// still checked as Asterisk's option types would.
var aorOptions = map[string]aorOption{
	"type":                          func(*AoR, string) error { return nil },
	"contact":                       addContacts,
	"outbound_proxy":                setOutboundProxy,
	"qualify_frequency":             setFrequency,
	"qualify_timeout":               setTimeout,
	"qualify_2xx_only":              set2xxOnly,
	"qualify_latency_only":          setBool(func(a *AoR, b bool) { a.Policy.LatencyOnly = b }),
	"qualify_failures":              setFailures,
	"qualify_failures_min":          setSmallCount(func(a *AoR, n uint8) { a.Policy.FailuresMin = n }),
	"qualify_failures_max":          setSmallCount(func(a *AoR, n uint8) { a.Policy.FailuresMax = n }),
	"qualify_false_outages_per_day": setFalseOutages,
	"qualify_failure_window":        setInterval(func(a *AoR, d time.Duration) { a.Policy.FailureWindow = d }),
	"qualify_success_codes":         setSuccessCodes,
	"qualify_quiet_only":            setBool(func(a *AoR, b bool) { a.Policy.QuietOnly = b }),
	"qualify_call_failure_codes":    setCallFailureCodes,
	"qualify_drain_max":             setDrainMax,
	"qualify_successes":             setCount(func(a *AoR, n int) { a.Policy.Successes = n }),
	"qualify_retry_interval":        setInterval(func(a *AoR, d time.Duration) { a.Policy.RetryInterval = d }),
	"qualify_down_interval":         setInterval(func(a *AoR, d time.Duration) { a.Policy.DownInterval = d }),
	"authenticate_qualify":          setBool(nil),
	"remove_existing":               setBool(nil),
	"remove_unavailable":            setBool(nil),
	"support_path":                  setBool(nil),
	"max_contacts":                  checkUint,
	"minimum_expiration":            checkUint,
	"maximum_expiration":            checkUint,
	"default_expiration":            checkUint,
	"mailboxes":                     func(*AoR, string) error { return nil },
	"voicemail_extension":           func(*AoR, string) error { return nil },
}

// addContacts adds each URI of a comma-separated list, as Asterisk's
// permanent_uri_handler; a URI given twice is kept once.
func addContacts(a *AoR, value string) error {
	for uri := range listItems(value) {
		if err := checkContact(uri); err != nil {
			return err
		}
		if !contains(a.Contacts, uri) {
			a.Contacts = append(a.Contacts, uri)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// setFrequency reads qualify_frequency: whole seconds, 0..86400.
func setFrequency(a *AoR, v string) error {
	n, err := parseRange(v, 0, 86400)
	a.Policy.Frequency = seconds(float64(n))
	return err
}

// setTimeout reads qualify_timeout: fractional seconds, at most 86400;
// zero or less means the SIP transaction timeout.
func setTimeout(a *AoR, v string) error {
	f, err := parseFloat(v)
	switch {
	case err != nil:
		return err
	case f > 86400:
		return causef(ErrValue, "%q is out of range: must be at most 86400 seconds", v)
	}
	a.Policy.Timeout = seconds(max(f, 0))
	return nil
}

// setFailures reads qualify_failures: an integer of at least 1, or "auto"
// (qualify-semantics §5.1). The later of the two wins.
func setFailures(a *AoR, v string) error {
	if strings.EqualFold(v, "auto") {
		a.Policy.FailuresAuto = true
		return nil
	}
	n, err := parseRange(v, 1, math.MaxInt32)
	if err == nil {
		a.Policy.Failures, a.Policy.FailuresAuto = n, false
	}
	return err
}

// setSmallCount reads an integer in 1..255, a bound of the auto N.
func setSmallCount(set func(*AoR, uint8)) aorOption {
	return func(a *AoR, v string) error {
		n, err := parseRange(v, 1, math.MaxUint8)
		if err == nil {
			set(a, uint8(n))
		}
		return err
	}
}

// setFalseOutages reads qualify_false_outages_per_day: a positive decimal
// number, at most 86400.
func setFalseOutages(a *AoR, v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || strings.ContainsAny(v, "xX_") || !(f > 0 && f <= 86400) {
		return causef(ErrValue, "%q is not a number of false outages a day: must be more than 0 and at most 86400", v)
	}
	a.Policy.FalseOutagesPerDay = f
	return nil
}

// setSuccessCodes reads qualify_success_codes, which qualify_2xx_only=yes
// excludes.
func setSuccessCodes(a *AoR, v string) error {
	if a.Policy.Only2xx {
		return causef(ErrValue, "qualify_success_codes and qualify_2xx_only=yes are exclusive")
	}
	c, err := qualify.ParseCodes(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrValue, err)
	}
	a.Policy.SuccessCodes = c
	return nil
}

// setCallFailureCodes reads qualify_call_failure_codes: the final
// responses to a call that make a contact suspect (qualify-semantics
// §11.2).
func setCallFailureCodes(a *AoR, v string) error {
	c, err := qualify.ParseCodes(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrValue, err)
	}
	a.Policy.CallFailureCodes = c
	return nil
}

// setDrainMax reads qualify_drain_max: whole seconds, 1..86400.
func setDrainMax(a *AoR, v string) error {
	n, err := parseRange(v, 1, 86400)
	a.Policy.DrainMax = seconds(float64(n))
	return err
}

// set2xxOnly reads qualify_2xx_only, which qualify_success_codes excludes.
func set2xxOnly(a *AoR, v string) error {
	b, err := parseBool(v)
	switch {
	case err != nil:
		return err
	case b && !a.Policy.SuccessCodes.Empty():
		return causef(ErrValue, "qualify_2xx_only=yes and qualify_success_codes are exclusive")
	}
	a.Policy.Only2xx = b
	return nil
}

func setBool(set func(*AoR, bool)) aorOption {
	return func(a *AoR, v string) error {
		b, err := parseBool(v)
		if err == nil && set != nil {
			set(a, b)
		}
		return err
	}
}

// setCount reads an integer of at least 1.
func setCount(set func(*AoR, int)) aorOption {
	return func(a *AoR, v string) error {
		n, err := parseRange(v, 1, math.MaxInt32)
		if err == nil {
			set(a, n)
		}
		return err
	}
}

// setInterval reads fractional seconds in 0..86400.
func setInterval(set func(*AoR, time.Duration)) aorOption {
	return func(a *AoR, v string) error {
		d, err := parseSeconds(v)
		if err == nil {
			set(a, d)
		}
		return err
	}
}

func checkUint(_ *AoR, v string) error {
	_, err := parseUint(v)
	return err
}

// readAoR builds an AoR in a from a section's options, in order, with its
// policy shared through pols.
func readAoR(a *AoR, name, file string, line int, vars []variable, pols *policySet) error {
	pols.draft = qualify.DefaultPolicy()
	*a = AoR{AoR: probe.AoR{Name: name, Policy: &pols.draft}, File: file, Line: line}
	err := readOptions(a, name, file, line, vars)
	a.Policy = pols.get(pols.draft)
	return err
}

// policySet shares policies between the AoRs of a configuration: nearly
// all AoRs have the same few, and a million AoRs each with its own copy
// held 56 MB. An AoR's options are applied to draft, which the
// set then shares.
type policySet struct {
	m     map[qualify.Policy]*qualify.Policy
	draft qualify.Policy
}

// get returns the shared copy of p.
func (s *policySet) get(p qualify.Policy) *qualify.Policy {
	if s.m == nil {
		s.m = make(map[qualify.Policy]*qualify.Policy)
	}
	return share(s.m, p, nil)
}

// readOptions applies a section's options to a, whose Policy is the
// draft, and checks the result.
func readOptions(a *AoR, name, file string, line int, vars []variable) error {
	for _, v := range vars {
		apply, ok := aorOptions[v.name]
		if !ok {
			return optErr(name, v, causef(ErrUnknownOption, "Asterisk defines no AoR option %q", v.name))
		}
		if err := apply(a, v.value); err != nil {
			return optErr(name, v, err)
		}
	}
	if err := a.Policy.Validate(); err != nil {
		return &Error{File: file, Line: line, Section: name, Err: fmt.Errorf("%w: %w", ErrValue, err)}
	}
	a.own()
	return nil
}

// own copies the AoR's name and contacts out of the configuration's
// text, in one allocation: they are substrings of whole files, which the
// AoR would otherwise keep alive. (Its probe options are copied when
// finish shares them.)
func (a *AoR) own() {
	n := len(a.Name)
	for _, c := range a.Contacts {
		n += len(c)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(a.Name)
	for _, c := range a.Contacts {
		b.WriteString(c)
	}
	all := b.String()
	a.Name, all = all[:len(a.Name)], all[len(a.Name):]
	for i, c := range a.Contacts {
		a.Contacts[i], all = all[:len(c)], all[len(c):]
	}
}

// setOutboundProxy gives the AoR options of its own until finish shares
// them (see probeSet).
func setOutboundProxy(a *AoR, v string) error {
	a.Probe = &probe.Options{OutboundProxy: v}
	if v == "" {
		return nil
	}
	return checkProxy(v)
}
