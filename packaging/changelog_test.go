package main

import (
	"testing"
	"time"
)

func TestDebianChangelog(t *testing.T) {
	md := []byte("# Changelog\n\n## [Unreleased]\n\n### Added\n- next thing\n\n" +
		"## [0.1.0]\n\n### Added\n- reading `pjsip.conf` as Asterisk does: templates, inheritance,\n" +
		"  additions and includes with globs, one two three four five six seven\n- one more\n\n" +
		"[Unreleased]: https://example.invalid/compare\n")
	date := time.Date(2026, 12, 1, 9, 54, 0, 0, time.UTC)
	for _, tc := range []struct{ version, want string }{
		{"0.1.0", "qualifyd (0.1.0) unstable; urgency=medium\n\n  [ Added ]\n" +
			"  * reading `pjsip.conf` as Asterisk does: templates, inheritance, additions\n" +
			"    and includes with globs, one two three four five six seven\n" +
			"  * one more\n\n -- M <m@example.invalid>  Tue, 01 Dec 2026 09:54:00 +0000\n"},
		{"0.2.0", "qualifyd (0.2.0) unstable; urgency=medium\n\n  [ Added ]\n  * next thing\n\n" +
			" -- M <m@example.invalid>  Tue, 01 Dec 2026 09:54:00 +0000\n"},
	} {
		got, err := debianChangelog(md, tc.version, "M <m@example.invalid>", date)
		if err != nil || string(got) != tc.want {
			t.Errorf("debianChangelog(%s) = %v\n%s\nwant\n%s", tc.version, err, got, tc.want)
		}
	}
	if _, err := debianChangelog([]byte("# Changelog\n"), "0.1.0", "M", date); err == nil {
		t.Error("a changelog without the version or [Unreleased]: no error")
	}
}
