package qualify

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCodeRanges is how many disjoint ranges a Codes holds: lists in use
// have one to three ("200-299,404,405" is two once 404 and 405 merge).
const MaxCodeRanges = 8

// Final response codes a Codes may hold (RFC 3261 section 21: 1xx are
// provisional and never end a probe).
const (
	minFinalCode = 200
	maxFinalCode = 699
)

// Codes is a set of final response codes (qualify_success_codes), kept as
// up to MaxCodeRanges sorted, disjoint, non-adjacent ranges so that equal
// sets are equal values: a Policy stays comparable, and 32 bytes where a
// bitmap of 200..699 would take 64. The zero value is the empty set.
type Codes struct {
	r [MaxCodeRanges]codeRange // in order; unused ranges are zero
}

type codeRange struct{ lo, hi uint16 }

// ErrCodes is wrapped by every error ParseCodes returns.
var ErrCodes = errors.New("invalid status code list")

// ParseCodes reads a comma-separated list of codes and ranges, such as
// "200-299,404,405". Every code is a final response code, 200 to 699.
func ParseCodes(s string) (Codes, error) {
	var rs []codeRange
	for item := range strings.SplitSeq(s, ",") {
		r, err := parseCodeRange(strings.TrimSpace(item))
		if err != nil {
			return Codes{}, err
		}
		rs = append(rs, r)
	}
	return codesOf(rs)
}

// parseCodeRange reads "404" or "200-299".
func parseCodeRange(item string) (codeRange, error) {
	loS, hiS, isRange := strings.Cut(item, "-")
	lo, err := parseCode(item, loS)
	if err != nil || !isRange {
		return codeRange{lo, lo}, err
	}
	hi, err := parseCode(item, hiS)
	if err == nil && hi < lo {
		err = fmt.Errorf("%w: range %q is empty", ErrCodes, item)
	}
	return codeRange{lo, hi}, err
}

func parseCode(item, s string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %q is not a status code or a range of them", ErrCodes, item)
	case n < minFinalCode || n > maxFinalCode:
		return 0, fmt.Errorf("%w: %d is not a final response code (200 to 699)", ErrCodes, n)
	}
	return uint16(n), nil
}

// codesOf sorts and merges rs into a Codes.
func codesOf(rs []codeRange) (Codes, error) {
	slices.SortFunc(rs, func(a, b codeRange) int { return int(a.lo) - int(b.lo) })
	var c Codes
	n := 0
	for _, r := range rs {
		if n > 0 && r.lo <= c.r[n-1].hi+1 {
			c.r[n-1].hi = max(c.r[n-1].hi, r.hi)
			continue
		}
		if n == MaxCodeRanges {
			return Codes{}, fmt.Errorf("%w: more than %d separate ranges", ErrCodes, MaxCodeRanges)
		}
		c.r[n] = r
		n++
	}
	return c, nil
}

// Empty reports whether the set holds no code.
func (c Codes) Empty() bool { return c.r[0].hi == 0 }

// Contains reports whether code is in the set.
func (c Codes) Contains(code int) bool {
	for _, r := range c.r {
		if r.hi == 0 || code < int(r.lo) {
			return false
		}
		if code <= int(r.hi) {
			return true
		}
	}
	return false
}

// String returns the set as ParseCodes reads it, ranges merged
// ("200-299,404-405"), or "" for the empty set.
func (c Codes) String() string {
	var b strings.Builder
	for _, r := range c.r {
		if r.hi == 0 {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(r.lo)))
		if r.hi != r.lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(r.hi)))
		}
	}
	return b.String()
}
