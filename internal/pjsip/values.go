package pjsip

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/sipuri"
)

// parseUint reads an unsigned integer as Asterisk's ast_parse_arg with
// PARSE_UINT32 (strtoul, base 0): an optional '+', then "0x" hex, a leading
// "0" octal, or decimal; no sign '-', nothing after the digits.
func parseUint(s string) (uint32, error) {
	digits, base := strings.TrimPrefix(s, "+"), 10
	switch {
	case len(digits) > 2 && (digits[:2] == "0x" || digits[:2] == "0X"):
		digits, base = digits[2:], 16
	case len(digits) > 1 && digits[0] == '0':
		digits, base = digits[1:], 8
	}
	if digits == "" || !isDigits(digits, base) {
		return 0, causef(ErrValue, "%q is not an unsigned integer", s)
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, causef(ErrValue, "%q is out of range", s)
	}
	return uint32(n), nil
}

// isDigits reports whether s is only digits of base (strconv.ParseUint
// alone would also take underscores and prefixes).
func isDigits(s string, base int) bool {
	for _, r := range strings.ToLower(s) {
		ok := r >= '0' && r <= '9' && int(r-'0') < base || base == 16 && r >= 'a' && r <= 'f'
		if !ok {
			return false
		}
	}
	return true
}

// parseRange reads an unsigned integer in [lo, hi].
func parseRange(s string, lo, hi uint32) (int, error) {
	n, err := parseUint(s)
	if err != nil {
		return 0, err
	}
	switch {
	case n < lo && hi == math.MaxInt32:
		return 0, causef(ErrValue, "%q is out of range: must be at least %d", s, lo)
	case n < lo || n > hi:
		return 0, causef(ErrValue, "%q is out of range: must be between %d and %d", s, lo, hi)
	}
	return int(n), nil
}

// parseFloat reads a finite decimal number of seconds (as strtod, without
// the hexadecimal, infinite and NaN forms).
func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(s, "xX_") {
		return 0, causef(ErrValue, "%q is not a number of seconds", s)
	}
	return f, nil
}

// parseSeconds reads fractional seconds in [0, 86400] as a Duration,
// rounded to the nanosecond.
func parseSeconds(s string) (time.Duration, error) {
	f, err := parseFloat(s)
	if err != nil {
		return 0, err
	}
	if f < 0 || f > 86400 {
		return 0, causef(ErrValue, "%q is out of range: must be between 0 and 86400 seconds", s)
	}
	return seconds(f), nil
}

// seconds converts f seconds to a Duration, rounded to the nanosecond.
func seconds(f float64) time.Duration {
	return time.Duration(math.Round(f * float64(time.Second)))
}

// ParseBool reads a boolean as Asterisk's ast_true and ast_false, in any
// case: the words of every section of the file, the cluster's included. A
// value that is neither is an error (Asterisk would take it as false) that
// names the value only; callers wrap it in their own sentinel.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes", "true", "y", "t", "1", "on":
		return true, nil
	case "no", "false", "n", "f", "0", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (yes or no)", s)
}

// parseBool is ParseBool, its error an ErrValue.
func parseBool(s string) (bool, error) {
	b, err := ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrValue, err)
	}
	return b, nil
}

// splitList splits a comma-separated list, stripping each item and
// dropping empty ones.
func splitList(s string) []string {
	var out []string
	for item := range listItems(s) {
		out = append(out, item)
	}
	return out
}

// listItems yields the items of a comma-separated list, stripped, without
// the empty ones.
func listItems(s string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for more := true; more; {
			var item string
			item, s, more = strings.Cut(s, ",")
			if item = trimBlanks(item); item != "" && !yield(item) {
				return
			}
		}
	}
}

// trimBlanks is strings.Trim(s, blanks) without building the cutset's
// set on each call: it ran for every line and option.
func trimBlanks(s string) string {
	for s != "" && isBlank(s[0]) {
		s = s[1:]
	}
	for s != "" && isBlank(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// leadingBlanks returns how many blanks s starts with.
func leadingBlanks(s string) int {
	n := 0
	for n < len(s) && isBlank(s[n]) {
		n++
	}
	return n
}

func isBlank(c byte) bool {
	return c == ' ' || c >= '\t' && c <= '\r'
}

// checkContact accepts what Asterisk's ast_sip_validate_uri_length accepts,
// a sip: or sips: URI with a host of at most 255 characters, and of that
// what the prober can use (checkProbeable).
func checkContact(uri string) error {
	lower := strings.ToLower(uri)
	rest, ok := strings.CutPrefix(lower, "sip:")
	if !ok {
		rest, ok = strings.CutPrefix(lower, "sips:")
	}
	if !ok {
		return causef(ErrValue, "contact %q is not a sip: or sips: URI", uri)
	}
	host := uriHost(rest)
	if host == "" || len(host) > sipuri.MaxHost || strings.ContainsAny(host, blanks+"<>\"") {
		return causef(ErrValue, "contact %q has no valid host", uri)
	}
	return checkProbeable(uri)
}

// uriHost returns the host of a SIP URI after its scheme.
func uriHost(rest string) string {
	if i := strings.IndexAny(rest, ";?"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if i := strings.IndexByte(rest, ']'); i >= 0 {
			return rest[:i+1]
		}
		return ""
	}
	host, _, _ := strings.Cut(rest, ":")
	return host
}
