package pjsip

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestGolden reads realistic configuration trees, each from its own
// directory as the root of the file system, and compares the result with
// testdata/golden/NAME.golden.
func TestGolden(t *testing.T) {
	tests := []struct{ name, main, dir string }{
		{"freepbx", "/pjsip.conf", ""},
		{"wizard", "/qualifyd.conf", ""},
		{"templates", "/pjsip.conf", ""},
		// Asterisk's sample files' examples, all enabled: they load, with
		// warnings where Asterisk logs and carries on.
		{"asterisk-sample", "/pjsip.conf", ""},
		{"asterisk-wizard", "/qualifyd.conf", ""},
		// The PBX's relative includes resolve against its directory, as
		// they do in Asterisk: qualifyd.conf lives elsewhere, so the
		// configuration directory is set.
		{"overlay", "/etc/qualifyd/qualifyd.conf", "/etc/asterisk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join("testdata", "golden", tt.name)
			cfg, err := Load(tt.main, Options{FS: os.DirFS(root), ConfigDir: tt.dir})
			if err != nil {
				t.Fatal(err)
			}
			got := dump(cfg)
			golden := root + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s differs (go test -update to rewrite it):\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// TestConfigDir resolves relative includes against Options.ConfigDir
// instead of the main file's directory, as Asterisk's astetcdir.
func TestConfigDir(t *testing.T) {
	root := filepath.Join("testdata", "golden", "overlay")
	src := []byte("#include pjsip.conf\n[pbx07](+type=aor)\nqualify_failures=4\n")
	cfg, err := Parse("/elsewhere/qualifyd.conf", src, Options{FS: os.DirFS(root), ConfigDir: "/etc/asterisk"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AoRs) != 2 || cfg.AoRs[0].Name != "pbx07" || cfg.AoRs[0].Policy.Failures != 4 {
		t.Fatalf("got %+v", cfg.AoRs)
	}
	if got, want := cfg.AoRs[1].File, "/etc/asterisk/pjsip.trunks.conf"; got != want {
		t.Errorf("pbx08 File = %q, want %q", got, want)
	}
}

// TestLoadOS reads from the operating system's files, with the default
// configuration directory, the main file's.
func TestLoadOS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pjsip.conf", "#include \"aors.conf\"\n")
	write("aors.conf", "[a]\ntype=aor\ncontact=sip:a@192.0.2.1\n")
	cfg, err := Load(filepath.Join(dir, "pjsip.conf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AoRs) != 1 || cfg.AoRs[0].File != filepath.ToSlash(filepath.Join(dir, "aors.conf")) || cfg.AoRs[0].Line != 1 {
		t.Fatalf("got %+v", cfg.AoRs)
	}
}
