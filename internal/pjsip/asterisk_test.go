package pjsip

import (
	"errors"
	"slices"
	"testing"
	"testing/fstest"
)

// TestNotAsterisk checks the notes of the AoRs that an unpatched Asterisk
// refuses to load: one per AoR at its first option Asterisk lacks, naming
// them all, and whether contrib/asterisk's patches are enough.
func TestNotAsterisk(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"Asterisk's options only", "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\nqualify_frequency=30\nqualify_timeout=3\nqualify_2xx_only=yes", nil},
		{"the patches' options", "[a]\ntype=aor\nqualify_frequency=30\nqualify_failures=3\nqualify_retry_interval=2\nqualify_failures=2\n[b]\ntype=aor\nqualify_latency_only=yes", []string{
			`pjsip.conf:4: section "a": option "qualify_failures": not an Asterisk option: Asterisk refuses to load an AoR that sets qualify_failures, qualify_retry_interval unless it has contrib/asterisk's qualify patches`,
			`pjsip.conf:9: section "b": option "qualify_latency_only": not an Asterisk option: Asterisk refuses to load an AoR that sets qualify_latency_only unless it has contrib/asterisk's qualify patches`}},
		{"qualifyd's own", "[a]\ntype=aor\nqualify_successes=2\nqualify_success_codes=200-299,404", []string{
			`pjsip.conf:3: section "a": option "qualify_successes": not an Asterisk option: Asterisk refuses to load an AoR that sets qualify_successes, qualify_success_codes (no Asterisk defines qualify_success_codes, even with contrib/asterisk's qualify patches)`}},
		{"auto", "[a]\ntype=aor\nqualify_failures=auto", []string{
			`pjsip.conf:3: section "a": option "qualify_failures": not an Asterisk option: Asterisk refuses to load an AoR that sets qualify_failures (no Asterisk defines qualify_failures, even with contrib/asterisk's qualify patches)`}},
		{"wizard", "[w]\ntype=wizard\nremote_hosts=192.0.2.1\naor/qualify_frequency=30\naor/qualify_down_interval=10\nendpoint/context=x", []string{
			`pjsip.conf:5: section "w": option "aor/qualify_down_interval": not an Asterisk option: Asterisk refuses to load a wizard's AoR that sets qualify_down_interval unless it has contrib/asterisk's qualify patches`}},
		{"qualifyd's overlay", "[a]\ntype=aor\n#include qualifyd-overlay.conf", nil},
		{"an include of pjsip.conf", "[a]\ntype=aor\n#include pjsip_trunks.conf", []string{
			`pjsip_trunks.conf:1: section "a": option "qualify_failures": not an Asterisk option: Asterisk refuses to load an AoR that sets qualify_failures unless it has contrib/asterisk's qualify patches`}},
		{"template", "[t](!)\nqualify_failures=3\n[a](t)\ntype=aor", []string{
			`pjsip.conf:2: section "a": option "qualify_failures": not an Asterisk option: Asterisk refuses to load an AoR that sets qualify_failures unless it has contrib/asterisk's qualify patches`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := fstest.MapFS{
				"qualifyd-overlay.conf": &fstest.MapFile{Data: []byte("qualify_failures=3\nqualify_retry_interval=2\n")},
				"pjsip_trunks.conf":     &fstest.MapFile{Data: []byte("qualify_failures=3\n")},
			}
			cfg, err := Parse("pjsip.conf", []byte(tt.src), Options{FS: files, NoteAsterisk: true})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range cfg.NotAsterisk {
				if !errors.Is(n, ErrNotAsterisk) {
					t.Errorf("%v does not wrap ErrNotAsterisk", n)
				}
				got = append(got, n.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("notes\n got: %q\nwant: %q", got, tt.want)
			}
			if len(cfg.Warnings) != 0 {
				t.Errorf("warnings %v, want none", cfg.Warnings)
			}
			// The daemon's reading keeps no note.
			if cfg, err := Parse("pjsip.conf", []byte(tt.src), Options{FS: files}); err != nil {
				t.Error(err)
			} else if len(cfg.NotAsterisk) != 0 {
				t.Errorf("without NoteAsterisk, notes %v", cfg.NotAsterisk)
			}
		})
	}
}
